package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgecount/edgecount/buildinfo"
)

// buildInfo returns the gauge edgecount_build_info, 1, labelled with info:
// version, revision (the full VCS revision, "-modified" appended when the
// tree had uncommitted changes) and goversion. A query joins on it to tell
// which build each process runs (group by version during a rollout).
func buildInfo(info buildinfo.Info) prometheus.Collector {
	revision := info.Revision
	if info.Modified && revision != buildinfo.Unknown {
		revision += "-modified"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "edgecount_build_info",
		Help: "Always 1; the labels name the build of the process (as edge-agent --version prints it).",
		ConstLabels: prometheus.Labels{
			"version": info.Version, "revision": revision, "goversion": info.GoVersion,
		},
	})
	g.Set(1)
	return g
}
