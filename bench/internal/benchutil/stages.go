package benchutil

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics scrapes the daemon's /metrics on its socket.
func (d *Daemon) Metrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	sock := filepath.Join(d.Home, "paddock.sock")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://paddock/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// The stages of a call through the broker, in their order, as
// paddock_tool_call_stage_duration_seconds names them (lifecycle.Stage*).
var callStages = []string{"queue", "read", "claim", "call", "record"}

// StageTable is a markdown table of where the calls of tool spent their
// time, stage by stage, from the daemon's metrics: each stage's count,
// mean, and p50 and p99 as Prometheus's histogram_quantile estimates them
// (within a bucket, by its bounds).
func StageTable(fams map[string]*dto.MetricFamily, tool string) string {
	f := fams["paddock_tool_call_stage_duration_seconds"]
	if f == nil {
		return "(no paddock_tool_call_stage_duration_seconds in the daemon's metrics)\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| %s: stage | calls | mean | p50 | p99 |\n|---|---|---|---|---|\n", tool)
	for _, stage := range callStages {
		for _, m := range f.GetMetric() {
			if label(m, "tool") != tool || label(m, "stage") != stage {
				continue
			}
			h := m.GetHistogram()
			n := h.GetSampleCount()
			if n == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", stage, n, seconds(h.GetSampleSum()/float64(n)),
				estimate(h, 0.5), estimate(h, 0.99))
		}
	}
	return b.String()
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// estimate is h's q-quantile as quantile estimates it, or, where it falls
// in the first bucket (whose interpolation from 0 says nothing), that
// bucket's bound as a ceiling.
func estimate(h *dto.Histogram, q float64) string {
	v := quantile(h, q)
	if bs := sortedBuckets(h); len(bs) > 0 && float64(bs[0].GetCumulativeCount()) >= q*float64(h.GetSampleCount()) {
		return "≤ " + seconds(bs[0].GetUpperBound())
	}
	return seconds(v)
}

func sortedBuckets(h *dto.Histogram) []*dto.Bucket {
	bs := slices.Clone(h.GetBucket())
	slices.SortFunc(bs, func(a, b *dto.Bucket) int { return cmp.Compare(a.GetUpperBound(), b.GetUpperBound()) })
	return bs
}

// quantile estimates h's q-quantile as histogram_quantile does: linearly
// within the bucket it falls in (from 0 in the first).
func quantile(h *dto.Histogram, q float64) float64 {
	bs := sortedBuckets(h)
	rank := q * float64(h.GetSampleCount())
	lower, below := 0.0, 0.0
	for _, bk := range bs {
		upper, count := bk.GetUpperBound(), float64(bk.GetCumulativeCount())
		if count >= rank {
			if math.IsInf(upper, 1) || count == below {
				return lower
			}
			return lower + (upper-lower)*(rank-below)/(count-below)
		}
		lower, below = upper, count
	}
	return lower // above the last bound: its lower bound, as Prometheus says
}

func seconds(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	case s >= 0.001:
		return fmt.Sprintf("%.2f ms", s*1e3)
	default:
		return fmt.Sprintf("%.0f µs", s*1e6)
	}
}
