// Package warc writes the crawl's archive: WARC/1.1 files (ISO 28500) of
// gzip members, one record each, that replay tools and indexers read.
//
// Every fetch is a request record and a response record that name each
// other (WARC-Concurrent-To), with the bytes as they crossed the wire
// (fetch.Wire) and sha1 block and payload digests in base32, as wget and
// Heritrix write them: the block's over those bytes, the payload's over
// the body de-chunked, content coding kept (payload.go). The records' fields use gowarc's field names and
// profiles, written as they are (warcFields), and gowarc reads them back in Check; they are
// laid out here rather than by gowarc's record builder, which buffers,
// reparses and validates every block and was most of the archive's cost
// (see BENCHMARKS.md). A payload archived before in the crawl is written
// as an identical-payload-digest revisit of its first capture, and a
// refresh's 304 as a server-not-modified revisit of the page's last full
// response (Exchange.Original); a revisit names its original by the
// original's own WARC-Target-URI and WARC-Date, exactly.
//
// A request record is the request to the origin, not to a proxy: Encode
// puts the request line in origin-form and leaves out Proxy-Authorization
// and Proxy-Connection, and unless Options.KeepSecrets it writes
// SecretMarker for the values of secret headers (fetch.IsSecretHeader), so
// that an archive handed on holds no credential; each warcinfo record says
// which (breakwater-secrets: masked or kept). Responses are kept as sent.
//
// The archive keeps step with the database (Writer is the frontier's
// Archive): workers encode and compress their records (Writer.Encode),
// the records ride the batch that marks their pages done, and the one
// writer appends them and flushes the file before that batch commits.
// The commit records how many bytes of the file it accounts for, and the
// name of a new file is committed before the file exists. After a crash
// Open cuts the unfinished file back to that size, so a page is in the
// archive exactly when the database has it done: never missing, never
// twice. Files are written as NAME.warc.gz.open and renamed when finished.
//
// The archive's index is DIR/index.cdxj (index.go, cdxj.go): a CDXJ line
// for each response and revisit record, as pywb and ReplayWeb.page read
// them, keyed by SURT (surt.go) and sorted bytewise. The writer keeps the
// lines of the file it writes, of the records commits accounted for,
// sorted in bounded memory, and puts them beside the file when it is
// finished (NAME.warc.gz.cdxj); WriteIndex merges the files' indexes, and
// reads only a file that has none (archived before, or recovered after a
// crash). Indexes are derived data: nothing is fsynced for them but the
// merged index, once, and a lost one is made again.
//
// Check reads an archive back, as `breakwater warc-check` does.
package warc
