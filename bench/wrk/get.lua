-- GET <path> with the header "Authorization: <scheme> <credential>": the same page read with an Inbox
-- session's token (Bearer) and with the API key (ApiKey).
-- args: <scheme> <credential> <path>

local path

function init(args)
   wrk.headers["Authorization"] = args[1] .. " " .. args[2]
   path = args[3]
end

function request()
   return wrk.format("GET", path)
end
