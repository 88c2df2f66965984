module breakwater

go 1.26.0

require (
	github.com/PuerkitoBio/goquery v1.13.0
	github.com/google/uuid v1.6.0
	github.com/klauspost/compress v1.18.0
	github.com/nlnwa/gowarc/v3 v3.1.0
	github.com/nlnwa/whatwg-url v0.6.2
	github.com/spf13/pflag v1.1.0
	github.com/temoto/robotstxt v1.1.2
	go.etcd.io/bbolt v1.5.0
	go.uber.org/goleak v1.3.0
	golang.org/x/net v0.62.0
	golang.org/x/term v0.48.0
	golang.org/x/time v0.16.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/andybalholm/cascadia v1.3.4 // indirect
	github.com/bits-and-blooms/bitset v1.24.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
