package report

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes the report as one indented JSON object, the schema of
// Report (docs/report.md). Text from pages is written as is: no HTML
// escaping, which is the reader's business.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}
