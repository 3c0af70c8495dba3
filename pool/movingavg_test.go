package pool_test

import (
	"context"
	"github.com/durable-lease/durable-lease/pool"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRoundHalfUp(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want float64 }{
		{1000.5, 1001}, {1000.49, 1000}, {1000.51, 1001}, {2, 2},
		{0.49999999999999994, 0}, {-2.5, -2}, {-2.51, -3}, {-0.5, 0},
	}
	for _, tt := range tests {
		if got := pool.RoundHalfUp(tt.in); got != tt.want {
			t.Errorf("roundHalfUp(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if got := pool.RoundHalfUp(math.Inf(1)); !math.IsInf(got, 1) {
		t.Errorf("roundHalfUp(+Inf) = %v", got)
	}
}

// The moving average of a stats.json is what the Node tool computes from
// the same file: the mean rounded half up to the millisecond.
func TestMovingAvgRoundsAsTheNodeTool(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		stats string
		want  time.Duration
	}{
		{"a tie rounds up", `{"durationsMs":[1000,1001]}`, 1001 * time.Millisecond},
		{"two thirds round up", `{"durationsMs":[1,2,2]}`, 2 * time.Millisecond},
		{"a third rounds down", `{"durationsMs":[1,1,2]}`, 1 * time.Millisecond},
		{"fractions in the file", `{"durationsMs":[0.4,0.4]}`, 0},
		{"one sample", `{"durationsMs":[360000]}`, 6 * time.Minute},
		{"no history: the seed", `{"durationsMs":[]}`, 8 * time.Minute},
		{"no file: the seed", ``, 8 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := newTestPool(t, oneSlotPool, pool.Options{})
			if tt.stats != "" {
				must(t, os.MkdirAll(tp.Dir(), 0o777))
				must(t, os.WriteFile(filepath.Join(tp.Dir(), pool.StatsFile), []byte(tt.stats), 0o666))
			}
			if got := tp.MovingAvg(context.Background()); got != tt.want {
				t.Errorf("MovingAvg = %v, want %v", got, tt.want)
			}
			st, err := tp.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.MovingAvgMs != tt.want.Milliseconds() {
				t.Errorf("Status().MovingAvgMs = %d, want %d", st.MovingAvgMs, tt.want.Milliseconds())
			}
		})
	}
}
