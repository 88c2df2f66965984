package extract

// ScanCSSWindow is ScanCSS lexing window bytes of the stylesheet at a time
// (window > CSSLookahead), for the tests that the result does not depend
// on where the windows fall.
var ScanCSSWindow = scanCSS

// CSSLookahead is how near a window's end a token is lexed again.
const CSSLookahead = cssLookahead
