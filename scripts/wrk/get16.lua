-- wrk script: GET /v1/counts with 16 content_id parameters, each uniform
-- over item-0..item-(ITEMS-1) (default 10^4, loadgen's -items), from 4096
-- requests drawn once. Used by scripts/bench.sh beside cmd/loadgen.
local items = tonumber(os.getenv("ITEMS") or "10000")
local paths = {}
math.randomseed(16)
for i = 1, 4096 do
  local q = {}
  for j = 1, 16 do
    q[j] = "content_id=item-" .. math.random(0, items - 1)
  end
  paths[i] = "/v1/counts?" .. table.concat(q, "&")
end
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", paths[(n % 4096) + 1])
end
