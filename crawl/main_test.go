package crawl_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when any test leaves a goroutine behind: an
// engine run must end every worker, writer, refill and connection it started.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
