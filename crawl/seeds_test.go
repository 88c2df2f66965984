package crawl_test

import (
	"io"
	"strings"
	"testing"

	"breakwater/crawl"
)

// readSeeds collects what ForEachSeed reads.
func readSeeds(r io.Reader, name string) ([]string, error) {
	var seeds []string
	err := crawl.ForEachSeed(r, name, nil, func(s string) error {
		seeds = append(seeds, s)
		return nil
	})
	return seeds, err
}

func TestReadSeeds(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{name: "plain", in: "http://a.example/\nhttps://b.example/x\n", want: []string{"http://a.example/", "https://b.example/x"}},
		{name: "comments and blanks", in: "# seeds\n\n  http://a.example/  # home\n\t\n#http://skipped/\n", want: []string{"http://a.example/"}},
		{name: "crlf", in: "http://a.example/\r\nhttp://b.example/\r\n", want: []string{"http://a.example/", "http://b.example/"}},
		{name: "empty", in: "", want: nil},
		{name: "bad scheme names line", in: "http://a.example/\n\nftp://b.example/\n", wantErr: "seeds.txt line 3"},
		{name: "not a url", in: "just words\n", wantErr: "seeds.txt line 1"},
		{name: "too long", in: "http://a.example/" + strings.Repeat("x", 3000) + "\n", wantErr: "seeds.txt line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readSeeds(strings.NewReader(tt.in), "seeds.txt")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzReadSeeds(f *testing.F) {
	f.Add("http://a.example/\n# c\nhttps://b.example/x?y#z\n")
	f.Add("javascript:alert(1)\n")
	f.Fuzz(func(t *testing.T, in string) {
		seeds, err := readSeeds(strings.NewReader(in), "fuzz")
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		for _, s := range seeds {
			if s == "" || strings.HasPrefix(s, "#") {
				t.Fatalf("kept a blank or comment line %q", s)
			}
		}
	})
}

func TestNormalizeSeed(t *testing.T) {
	for _, tc := range []struct {
		in, want   string
		schemeless bool
		wantErr    string // a fragment; "" means no error
	}{
		{in: "http://a.example/", want: "http://a.example/"},
		{in: "  HTTPS://a.example/x  ", want: "HTTPS://a.example/x"},
		{in: "example.com/docs", want: "http://example.com/docs", schemeless: true},
		{in: "localhost:8080/x", want: "http://localhost:8080/x", schemeless: true},
		{in: "127.0.0.1:8080", want: "http://127.0.0.1:8080", schemeless: true},
		{in: "//cdn.example/a", want: "http://cdn.example/a", schemeless: true},
		{in: "not a url", wantErr: "contains a space"},
		{in: "ftp://example.com/", wantErr: `the scheme "ftp" is not http or https`},
		{in: "mailto:someone@example.com", wantErr: `the scheme "mailto" is not http or https`},
		{in: "javascript:alert(1)", wantErr: `the scheme "javascript" is not http or https`},
		{in: "http://", wantErr: "does not contain a host"},
		{in: "http://x:99999/", wantErr: "port is outside the range"},
		{in: "", wantErr: "empty"},
	} {
		got, schemeless, err := crawl.NormalizeSeed(tc.in)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("NormalizeSeed(%q) = %q, %v; want an error saying %q", tc.in, got, err, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "ASCII alpha") {
				t.Errorf("NormalizeSeed(%q): the parser's wording leaks: %v", tc.in, err)
			}
		case err != nil || got != tc.want || schemeless != tc.schemeless:
			t.Errorf("NormalizeSeed(%q) = %q, %v, %v; want %q, %v", tc.in, got, schemeless, err, tc.want, tc.schemeless)
		}
	}
}
