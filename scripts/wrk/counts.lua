-- wrk script for count reads, used by scripts/bench.sh beside cmd/loadgen
-- (a C client with one event loop, like redis-benchmark):
--   IDS=1   GET /v1/counts/item-K
--   IDS=16  GET /v1/counts?content_id=item-K&… with 16 ids
-- each K uniform over 0..ITEMS-1 (default 10^4, loadgen's -items), from
-- 4096 requests drawn once.
local ids = tonumber(os.getenv("IDS") or "1")
local items = tonumber(os.getenv("ITEMS") or "10000")
local paths = {}
math.randomseed(ids)
for i = 1, 4096 do
  if ids == 1 then
    paths[i] = "/v1/counts/item-" .. math.random(0, items - 1)
  else
    local q = {}
    for j = 1, ids do
      q[j] = "content_id=item-" .. math.random(0, items - 1)
    end
    paths[i] = "/v1/counts?" .. table.concat(q, "&")
  end
end
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", paths[(n % 4096) + 1])
end
