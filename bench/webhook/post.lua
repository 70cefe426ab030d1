-- bench/webhook/post.lua: wrk's script for bench/webhook/run
--
--   wrk -t THREADS -c CONNECTIONS -d SECONDS -s post.lua URL -- PREFIX
--
-- Each request POSTs a JSON object of about 200 bytes (the same fields and
-- sizes as webhook_load.c's) with an id unique in the run:
-- "PREFIX-<thread>-<n>"; its other fields take one of 97 forms in turn.
-- Those forms, and the request line and headers, are made once, in
-- init(): made anew for each request (with wrk.format), they cost wrk
-- about a sixth more CPU a request, on the cores that the server it
-- measures runs on.  wrk runs this file in an interpreter of its own
-- for each thread and one more for setup() and done(): a variable at file
-- scope is one thread's, so each thread counts its own requests and takes
-- its number from setup(), which runs in the main interpreter for each
-- thread in turn.
--
-- done() prints one line after wrk's own report:
--
--   post.lua: generated=N body_bytes=B
--
-- generated: the bodies the threads made, each sent at most once (wrk has
-- the first thread make one to check the script, and sends none of that),
-- which includes the requests still unanswered when wrk stopped;
-- body_bytes: the average body.

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

-- main interpreter: the threads, numbered from 1
local threads = {}

function setup(thread)
	table.insert(threads, thread)
	thread:set("thread_number", #threads)
end

-- a thread's interpreter: its prefix, and what it made
prefix = nil
made = 0
made_bytes = 0

-- what request() puts around an id: the request line and headers (without
-- Content-Length), and the fields after the id, in VARIANTS forms
local VARIANTS = 97
head = nil
tails = {}

function init(args)
	if args[1] == nil or args[1] == "" then
		error("post.lua needs a prefix for the ids: wrk ... URL -- PREFIX")
	end
	prefix = '{"id": "' .. args[1] .. "-" .. thread_number .. "-"
	-- without a body (wrk.body is not set here), wrk.format gives no
	-- Content-Length and ends the headers with an empty line: cut it
	head = string.sub(wrk.format(nil, nil, nil, nil), 1, -3)
	for k = 0, VARIANTS - 1 do
		local n = thread_number * 7919 + k
		tails[k] = string.format(
			'", "amount": %d.%02d, "currency": "EUR", ' ..
			'"kind": "%s", "customer": "customer-%d", ' ..
			'"at": "2026-01-%02dT%02d:%02d:%02dZ", ' ..
			'"note": "standard delivery, leave at the door, ring twice"}',
			n % 500, n % 100, (n % 3 ~= 0) and "order" or "refund",
			n % 5000, 1 + n % 28, n % 24, n % 60, (n * 7) % 60)
	end
end

function request()
	local n = made + 1
	local body = prefix .. n .. tails[n % VARIANTS]

	made = n
	made_bytes = made_bytes + #body
	return head .. "Content-Length: " .. #body .. "\r\n\r\n" .. body
end

function done(summary, latency, requests)
	local generated, bytes = 0, 0

	for _, thread in ipairs(threads) do
		generated = generated + thread:get("made")
		bytes = bytes + thread:get("made_bytes")
	end
	io.write(string.format("post.lua: generated=%d body_bytes=%d\n", generated,
						   generated > 0 and math.floor(bytes / generated + 0.5) or 0))
end
