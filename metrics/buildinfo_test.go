package metrics

import (
	"maps"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/edgecount/edgecount/buildinfo"
)

// gatherBuildInfo returns the labels and value of the one
// edgecount_build_info series reg gathers.
func gatherBuildInfo(t *testing.T, reg prometheus.Gatherer) (map[string]string, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "edgecount_build_info" {
			continue
		}
		if mf.GetType() != dto.MetricType_GAUGE || len(mf.GetMetric()) != 1 {
			t.Fatalf("edgecount_build_info: %v with %d series; want one gauge", mf.GetType(), len(mf.GetMetric()))
		}
		m := mf.GetMetric()[0]
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		return labels, m.GetGauge().GetValue()
	}
	t.Fatal("edgecount_build_info not gathered")
	return nil, 0
}

func TestBuildInfo(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name string
		info buildinfo.Info
		want map[string]string
	}{
		{"release", buildinfo.Info{Version: "v1.2.3", Revision: rev, GoVersion: "go1.26.8"},
			map[string]string{"version": "v1.2.3", "revision": rev, "goversion": "go1.26.8"}},
		{"modified tree", buildinfo.Info{Version: "(devel)", Revision: rev, Modified: true, GoVersion: "go1.26.8"},
			map[string]string{"version": "(devel)", "revision": rev + "-modified", "goversion": "go1.26.8"}},
		{"nothing recorded", buildinfo.Info{Version: buildinfo.Unknown, Revision: buildinfo.Unknown, GoVersion: "go1.26.8"},
			map[string]string{"version": "unknown", "revision": "unknown", "goversion": "go1.26.8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			if err := reg.Register(buildInfo(tt.info)); err != nil {
				t.Fatal(err)
			}
			labels, v := gatherBuildInfo(t, reg)
			if !maps.Equal(labels, tt.want) || v != 1 {
				t.Errorf("edgecount_build_info%v = %g; want %v = 1", labels, v, tt.want)
			}
		})
	}
}

// TestNewRegistryHasBuildInfo: every process registry exports the running
// binary's build.
func TestNewRegistryHasBuildInfo(t *testing.T) {
	info := buildinfo.Read()
	labels, v := gatherBuildInfo(t, NewRegistry())
	if labels["version"] != info.Version || labels["goversion"] != info.GoVersion || v != 1 {
		t.Errorf("edgecount_build_info%v = %g; want version %s, goversion %s, 1", labels, v, info.Version, info.GoVersion)
	}
}
