-- POST /v2/workflows/<workflow>/step/<step>/preview: renders the stored email step (bench/run.sh creates it)
-- over a previewPayload like the one an editor sends: an order with five line items, a coupon, a shipping
-- address and a subscriber. Order number, date, quantities, prices and the shipping method (an `if` branch)
-- are random, so no two requests render the same text.
-- args: <api key> <workflow identifier> <step identifier>

local path

function init(args)
   wrk.headers["Authorization"] = "ApiKey " .. args[1]
   wrk.headers["Content-Type"] = "application/json"
   path = "/v2/workflows/" .. args[2] .. "/step/" .. args[3] .. "/preview"
   seed_random()
end

local products = {
   { "Walnut desk lamp", "lmp-204", "walnut" },
   { "Standing desk, 140 cm", "dsk-140", "oak" },
   { "Ergonomic office chair", "chr-77", "graphite" },
   { "Wool desk mat", "mat-12", "" },
   { "Cable tray", "cbl-3", "white" },
}

local function item(p)
   local variant = p[3] ~= "" and string.format(',"variant":"%s"', p[3]) or ""
   return string.format(
      '{"name":"%s","sku":"%s","qty":%d,"price":%d.%02d,"imageUrl":"https://shop.example.com/img/%s.png"%s}',
      p[1], p[2], math.random(3), 5 + math.random(400), math.random(0, 99), p[2], variant)
end

function request()
   local items = {}
   for i, p in ipairs(products) do
      items[i] = item(p)
   end
   local order = math.random(100000, 999999)
   local body = string.format(
      '{"previewPayload":{"payload":{"orderId":"a-%d","createdAt":"2026-11-%02dT%02d:%02d:00.000Z",'
         .. '"currency":"EUR","items":[%s],"subtotal":%d.%02d,"total":%d.%02d,'
         .. '"coupon":{"code":"welcome10","amount":10},'
         .. '"shipping":{"method":"%s","cost":%d,"address":{"name":"Ada Lovelace","line1":"12 St James\'s Square",'
         .. '"line2":"Flat 3","postcode":"SW1Y 4JH","city":"London","country":"gb"}},'
         .. '"orderUrl":"https://shop.example.com/account/orders/a-%d"},'
         .. '"subscriber":{"subscriberId":"bench%d","firstName":"Ada","lastName":"Lovelace",'
         .. '"email":"ada%d@bench.example.com","locale":"en_GB"}}}',
      order, math.random(28), math.random(0, 23), math.random(0, 59), table.concat(items, ","),
      math.random(2000), math.random(0, 99), math.random(2000), math.random(0, 99),
      math.random(2) == 1 and "express" or "standard", math.random(0, 1) * 9, order, order, order)
   return wrk.format("POST", path, nil, body)
end
