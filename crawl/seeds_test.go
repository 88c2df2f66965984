package crawl_test

import (
	"strings"
	"testing"

	"breakwater/crawl"
)

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
			got, err := crawl.ReadSeeds(strings.NewReader(tt.in), "seeds.txt")
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
		seeds, err := crawl.ReadSeeds(strings.NewReader(in), "fuzz")
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
