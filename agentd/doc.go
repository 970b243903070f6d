// Package agentd is the edge-agent process's wiring: Start opens or
// connects to everything the configuration names and serves the HTTP API;
// Wait runs the node until a signal or a failed component and shuts it
// down in order. The edge-agent command parses its flags and calls it.
//
// What a Node holds depends on the configuration:
//
//   - Standalone (no NATS URL): every part of a region in one process
//     under the data directory: the embedded store (edgecount.db), an
//     embedded NATS JetStream server (nats/), the rollup consuming every
//     partition in-process (its admin routes on the agent's address), the
//     agent with its log, and its HTTP API.
//   - In a region (a region file): the agent alone, connected to the
//     region's NATS, Cassandra and, when configured, Redis (the shard
//     directory); the rollups are processes of their own. With
//     gossip.bind it joins the region's agents to share trending
//     summaries and answer fresh reads.
//
// Start runs these steps, each named by a method; each registers what it
// opened, so a step that fails closes exactly what the steps before it
// opened, in reverse order:
//
//  1. loadTLS: the listener's certificate (agent.tls), first, so that one
//     that does not load fails before anything opens;
//  2. loadIdentity: the agent id recorded in the data directory (made
//     there once) and the epoch of this run;
//  3. openStore: the embedded store, or Cassandra;
//  4. openBus: the embedded NATS server and a connection to it, or a
//     connection to the region's NATS; the stream the agent publishes to;
//  5. buildRollup: the in-process rollup (standalone only);
//  6. buildAgent: the shard directory (Redis or local), the health
//     checks, region.New, the log's replay (Recover), Start, and the
//     subscription to the rollups' row pushes;
//  7. listen: the HTTP listener;
//  8. joinGossip: the region's gossip cluster (with gossip.bind; after the
//     listener, whose address the peers learn);
//  9. registerMetrics: the parts' metrics on the node's registry;
//  10. buildHTTP: the API's handler and routes (with debug.pprof, the
//     profiles under /debug/pprof/), the bearer-token check (auth) and
//     the server.
//
// The HTTP server, the in-process rollup and the gossip broadcaster then
// run on goroutines under one errgroup; Failed is done when one of them
// stops on its own.
//
// Shutdown stops the node in this order: stop intake (HTTP), final flush
// (the agent), drain NATS (the in-process rollup applies everything
// published and stops; the broker connection drains), leave gossip, close
// stores (the directory, the broker, the store, with the rest of what the
// start opened, in reverse order). It waits for every goroutine the node
// started. SIGHUP, while the node runs, reloads the token file, the
// listener's certificate and the gossip keys; a reload that fails changes
// nothing.
//
// Addr, Scheme, AgentID and Failed are safe for concurrent use once
// Start has returned. Wait or Shutdown is called once, by the goroutine
// that owns the node.
package agentd
