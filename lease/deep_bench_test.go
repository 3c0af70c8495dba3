package lease

import (
	"strings"
	"testing"
	"time"
)

// BenchmarkDecodeDeepMax decodes the worst record a reader can meet: the
// record size limit filled with one nested payload.
func BenchmarkDecodeDeepMax(b *testing.B) {
	n := (MaxRecordBytes - 200) / 2
	rec := []byte(`{"v":1,"kind":"k","owner":"o","token":"t","heartbeat":"` + FormatTime(time.Now()) +
		`","ttlMinutes":5,"payload":` + strings.Repeat("[", n) + strings.Repeat("]", n) + "}")
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		if r := DecodeRecord("k", rec); r.Corrupt {
			b.Fatal(r.Reason)
		}
	}
}
