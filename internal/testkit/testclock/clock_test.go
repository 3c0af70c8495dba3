package testclock

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want time.Time
		bad  bool
	}{
		{name: "the suite's lease clock", in: "1000000000000", want: time.Date(2001, 9, 9, 1, 46, 40, 0, time.UTC)},
		{name: "milliseconds kept", in: "1700000000123", want: time.UnixMilli(1700000000123).UTC()},
		{name: "the epoch", in: "0", want: time.Unix(0, 0).UTC()},
		{name: "before the epoch", in: "-1", want: time.UnixMilli(-1).UTC()},
		{name: "JavaScript's last instant", in: "8640000000000000", want: time.UnixMilli(8_640_000_000_000_000).UTC()},
		{name: "past JavaScript's range", in: "8640000000000001", bad: true},
		{name: "fractional", in: "1.5", bad: true},
		{name: "not a number", in: "now", bad: true},
		{name: "spaces", in: " 1000", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parse(tt.in)
			if tt.bad {
				if err == nil {
					t.Fatalf("parse(%q) = %v, want an error", tt.in, got.Now())
				}
				return
			}
			if err != nil {
				t.Fatalf("parse(%q): %v", tt.in, err)
			}
			if !got.Now().Equal(tt.want) {
				t.Errorf("parse(%q) = %v, want %v", tt.in, got.Now(), tt.want)
			}
		})
	}
}
