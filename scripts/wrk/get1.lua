-- wrk script: GET /v1/counts/item-K, K uniform over 0..ITEMS-1 (default
-- 10^4, loadgen's -items), from 4096 paths drawn once. Used by
-- scripts/bench.sh beside cmd/loadgen: a C client like redis-benchmark.
local items = tonumber(os.getenv("ITEMS") or "10000")
local paths = {}
math.randomseed(1)
for i = 1, 4096 do
  paths[i] = "/v1/counts/item-" .. math.random(0, items - 1)
end
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", paths[(n % 4096) + 1])
end
