package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/edgecount/edgecount/gossip"
)

// Cluster is what GET /v1/cluster needs of the agent's gossip node
// (*gossip.Node). Cluster is called concurrently from many requests.
type Cluster interface {
	// Cluster returns the region's members as this node sees them and
	// what each published; GET /v1/cluster answers its encoding/json form.
	Cluster() gossip.ClusterView
}

// getCluster answers GET and HEAD /v1/cluster: the gossip cluster's view as
// JSON (a line, not cached), 404 when the agent runs no gossip, and 405
// with Allow: GET, HEAD for any other method.
func (a *api) getCluster(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		a.writeError(w, &apiError{status: http.StatusMethodNotAllowed, msg: "method " + r.Method + " is not allowed"})
		return
	}
	if a.cluster == nil {
		a.writeError(w, &apiError{status: http.StatusNotFound, msg: "this agent runs no gossip (set gossip.bind)"})
		return
	}
	body, err := json.Marshal(a.cluster.Cluster())
	if err != nil {
		a.log.Error("cannot encode the cluster view", "err", err)
		a.writeError(w, errInternal)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, append(body, '\n'))
}
