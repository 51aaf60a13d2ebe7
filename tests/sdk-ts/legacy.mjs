// What the legacy-SDK scripts (preferences_v1.mjs, topics_v1.mjs) share: a client of @novu/api 0.0.1, installed as
// the npm alias `@novu/api-legacy` (package.json), whose every exchange is recorded in lib.mjs's `exchanges`.

import { Novu } from "@novu/api-legacy";
import { HTTPClient } from "@novu/api-legacy/lib/http.js";

import { KEY, URL, exchanges } from "./lib.mjs";

export * as legacyErrors from "@novu/api-legacy/models/errors/index.js";

const http = new HTTPClient();
http.addHook("response", async (res, req) => {
  exchanges.push({ method: req.method, url: req.url, status: res.status, body: await res.clone().text() });
});
export const novu = new Novu({ apiKey: KEY, serverURL: URL, retryConfig: { strategy: "none" }, httpClient: http });
