// The tests' independent reader: warcio.js (npm warcio), the WARC library
// ReplayWeb.page reads archives with. The Go tests run it; nothing else does.
//
//   node warcio.cjs PACKAGE_DIR surt         URLs on stdin, one a line: each one's getSurt, one a line
//   node warcio.cjs PACKAGE_DIR slices DIR   CDXJ lines on stdin: for each, the bytes its offset and
//                                            length name in DIR/filename, parsed alone, as one JSON line
//   node warcio.cjs PACKAGE_DIR index FILE.. warcio's own CDXJ lines of each WARC file
//
// PACKAGE_DIR is where `npm install --prefix` put warcio (its node_modules/warcio).
"use strict";
const fs = require("fs");
const path = require("path");
const readline = require("readline");

const [pkgDir, mode, ...args] = process.argv.slice(2);
const warcio = require(path.join(pkgDir, "node_modules", "warcio"));

async function* lines() {
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (line !== "") yield line;
  }
}

function out(s) {
  process.stdout.write(s + "\n");
}

async function surt() {
  for await (const url of lines()) out(warcio.getSurt(url));
}

// A replay reads one record from the offset and length the index gives:
// this does the same, and says what it found there and whether anything
// follows the record within those bytes.
async function slices(dir) {
  for await (const line of lines()) {
    const cdx = JSON.parse(line.slice(line.indexOf(" {") + 1));
    const offset = Number(cdx.offset);
    const length = Number(cdx.length);
    const buf = Buffer.alloc(length);
    const fd = fs.openSync(path.join(dir, cdx.filename), "r");
    const got = fs.readSync(fd, buf, 0, length, offset);
    fs.closeSync(fd);
    const found = { offset: cdx.offset, read: got };
    try {
      const parser = new warcio.WARCParser([new Uint8Array(buf.subarray(0, got))]);
      const record = await parser.parse();
      if (record) {
        const payload = await record.readFully(false);
        found.type = record.warcType;
        found.uri = record.warcTargetURI;
        found.date = record.warcDate;
        found.contentLength = Number(record.warcContentLength);
        found.payloadBytes = payload.length;
        if (record.httpHeaders) {
          found.status = record.httpHeaders.statusCode;
          found.contentType = record.httpHeaders.headers.get("content-type");
        }
        const next = await parser.parse();
        found.next = next ? next.warcType : null;
      }
    } catch (e) {
      found.error = String(e);
    }
    out(JSON.stringify(found));
  }
}

async function index(files) {
  const indexer = new warcio.CDXIndexer({ format: "cdxj" });
  for (const file of files) {
    const records = [{ filename: path.basename(file), reader: fs.createReadStream(file) }];
    for await (const cdx of indexer.iterIndex(records)) process.stdout.write(indexer.serialize(cdx));
  }
}

const modes = { surt: () => surt(), slices: () => slices(args[0]), index: () => index(args) };
if (!modes[mode]) {
  process.stderr.write("unknown mode " + mode + "\n");
  process.exit(2);
}
modes[mode]().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
