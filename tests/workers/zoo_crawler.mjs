// A small Node crawler that claims every page through `crawldedup serve` (run by tests/test_crawl_zoo.py).
//
// Usage: node zoo_crawler.mjs CONFIG_JSON
//
// CONFIG_JSON: {"start": [urls], "service": "http://127.0.0.1:PORT", "proxy": "http://127.0.0.1:PORT",
//               "workers": 8, "agent": "User-Agent", "maxRedirects": 20}
//
// Pages are fetched with Node's http and tls modules through an HTTP proxy: absolute-form
// requests for http URLs, a CONNECT tunnel and TLS for https ones (trusting the certificate
// authorities Node trusts, NODE_EXTRA_CA_CERTS included). The links of a page are claimed in
// one POST /v1/claim, and only the links won are fetched. Redirects are followed here, one hop
// at a time: before a Location is fetched, POST /v1/claim_final asks whether it is this fetch
// chain's page (the chain's URLs, first to last, as `requested`); a chain that would land on
// a page another request holds stops there. Prints one JSON line of figures on stdout.

import http from "node:http";
import tls from "node:tls";

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const TIMEOUT_MS = 20000;

const config = JSON.parse(process.argv[2]);
const proxy = new URL(config.proxy);
const plainAgent = new http.Agent({ keepAlive: true, maxSockets: config.workers });
const figures = { requests: 0, redirects: 0, pages: 0, links: 0, won: 0, dropped: 0, redirected_known: 0, loops: 0 };
const errors = [];

/** The response to GET `url` through the proxy: {status, location, body}. */
function get(url) {
  const target = new URL(url);
  const headers = { host: target.host, "user-agent": config.agent, accept: "text/html" };
  if (target.protocol === "http:") {
    return send({ host: proxy.hostname, port: proxy.port, path: target.href, headers, agent: plainAgent });
  }
  return new Promise((resolve, reject) => {
    const connect = http.request({
      host: proxy.hostname,
      port: proxy.port,
      method: "CONNECT",
      path: `${target.hostname}:${target.port || 443}`,
      headers: { host: `${target.hostname}:${target.port || 443}`, "user-agent": config.agent },
      timeout: TIMEOUT_MS,
    });
    connect.on("connect", (answer, socket) => {
      if (answer.statusCode !== 200) {
        socket.destroy();
        reject(new Error(`CONNECT ${target.host}: ${answer.statusCode}`));
        return;
      }
      const secure = tls.connect({ socket, servername: target.hostname });
      secure.on("error", reject);
      const path = target.pathname + target.search;
      send({ createConnection: () => secure, path, headers: { ...headers, connection: "close" } }).then(
        resolve,
        reject,
      );
    });
    connect.on("timeout", () => connect.destroy(new Error(`CONNECT ${target.host}: timed out`)));
    connect.on("error", reject);
    connect.end();
  });
}

function send(options) {
  return new Promise((resolve, reject) => {
    const request = http.request({ method: "GET", timeout: TIMEOUT_MS, ...options }, (response) => {
      const chunks = [];
      response.on("data", (chunk) => chunks.push(chunk));
      response.on("end", () =>
        resolve({
          status: response.statusCode,
          location: response.headers.location,
          body: Buffer.concat(chunks).toString("utf8"),
        }),
      );
      response.on("error", reject);
    });
    request.on("timeout", () => request.destroy(new Error(`GET ${options.path}: timed out`)));
    request.on("error", reject);
    request.end();
  });
}

/** POST a JSON call to the service; its JSON answer. */
async function call(path, body) {
  const answer = await fetch(config.service + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  const text = await answer.text();
  if (answer.status !== 200) throw new Error(`${path}: ${answer.status} ${text}`);
  return JSON.parse(text);
}

const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", "#39": "'" };

/** The absolute http(s) URLs a page links to, fragments removed. */
function links(body, page) {
  const found = [];
  for (const match of body.matchAll(/<a\s[^>]*href\s*=\s*"([^"]*)"/gi)) {
    const href = match[1].replace(/&(amp|lt|gt|quot|apos|#39);/g, (_, name) => ENTITIES[name]);
    let url;
    try {
      url = new URL(href, page);
    } catch {
      continue;
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") continue;
    url.hash = "";
    found.push(url.href);
  }
  return found;
}

const queue = [];

async function claim(urls) {
  if (urls.length === 0) return;
  const { won } = await call("/v1/claim", { urls });
  urls.forEach((url, i) => (won[i] ? queue.push(url) : figures.dropped++));
  figures.won += won.filter(Boolean).length;
}

/** Fetch one claimed URL, following its redirects hop by hop; claim the links of the page it ends on. */
async function visit(url) {
  const chain = [url];
  for (let hop = 0; ; hop++) {
    const current = chain[chain.length - 1];
    const response = await get(current);
    figures.requests++;
    if (REDIRECTS.has(response.status) && response.location) {
      figures.redirects++;
      if (hop >= config.maxRedirects) {
        figures.loops++;
        return;
      }
      const target = new URL(response.location, current);
      target.hash = "";
      const { won } = await call("/v1/claim_final", { final_urls: [target.href], requested: [chain] });
      if (!won[0]) {
        figures.redirected_known++;
        return;
      }
      chain.push(target.href);
      continue;
    }
    if (response.status !== 200) throw new Error(`${current}: status ${response.status}`);
    figures.pages++;
    const found = links(response.body, current);
    figures.links += found.length;
    await claim(found);
    return;
  }
}

function crawl() {
  return new Promise((resolve) => {
    let active = 0;
    const pump = () => {
      while (active < config.workers && queue.length > 0) {
        const url = queue.shift();
        active++;
        visit(url)
          .catch((error) => errors.push(String(error && error.message ? error.message : error)))
          .finally(() => {
            active--;
            pump();
          });
      }
      if (active === 0 && queue.length === 0) resolve();
    };
    pump();
  });
}

try {
  await claim(config.start);
  await crawl();
} catch (error) {
  errors.push(String(error && error.message ? error.message : error));
}
plainAgent.destroy();
process.stdout.write(JSON.stringify({ ...figures, errors }) + "\n");
process.exitCode = errors.length ? 1 : 0;
