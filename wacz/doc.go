// Package wacz packages a crawl's archive as a WACZ 1.1.1 file (Web
// Archive Collection Zipped): one ZIP that a replay tool such as
// ReplayWeb.page opens as it is, and that carries its own fixity.
//
// # Basics
//
// Write lays out, in this order:
//
//	archive/NAME.warc.gz      every WARC file given, stored as is (ZIP method Store)
//	indexes/index.cdxj        the CDXJ index, deflated
//	pages/pages.jsonl         the header line, then one page a line, deflated
//	datapackage.json          every file above with its sha256 and size
//	datapackage-digest.json   the sha256 of datapackage.json
//
// WARC files are already gzipped, one member a record, and a replay tool
// reads a record by its offset: compressing them again would hide the
// offsets, so they are stored. ListWARCs lists a directory's finished
// files apart from those still being written (.open), with the time the
// first of those was begun, so that a package made while a crawl runs can
// leave out the pages whose records are not finished yet. Verify reads a
// WACZ back and recomputes every hash and size.
//
// # Invariants
//
//   - Memory does not follow the archive's size: each file is copied
//     through its hash (io.MultiWriter) straight into the ZIP, the index
//     and the pages are streamed from the caller, and only the list of
//     resources (one entry a file) is held until datapackage.json is
//     written last.
//   - The index names no file the package lacks: a line whose filename is
//     not among the packaged WARC files (a file finished after the list
//     was taken) is left out and counted. Lines must come sorted
//     bytewise, as replay tools binary-search them; an unsorted index is
//     refused rather than packaged.
//   - Pages come seeds first; a seed after a page that is not one is
//     refused, since the caller promised an order it did not keep.
//   - WriteFile never leaves half a package under the name asked for: it
//     writes a temporary file beside it and renames it when complete.
//
// # Caveats
//
// Verify checks what the hashes cover, the files' contents; ZIP metadata
// such as an entry's modification time is covered by no hash, in any
// WACZ.
//
// # Concurrency
//
// Write and Verify keep no state between calls; the caller must not
// change the WARC files it lists while Write copies them (finished files
// never change).
package wacz
