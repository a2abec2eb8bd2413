// Drives SaltGUI, served by Brine's salt-api, in Debian's Chromium: logs in through `GET /`
// and visits the pages users open first, checking that each shows the stack's data and that
// the browser logs no error or warning. Prints one JSON report on stdout; exits 1 when a
// check fails.
//
// Environment: SALTGUI_URL (http://127.0.0.1:<port>), SALTGUI_USER, SALTGUI_PASS,
// SALTGUI_EAUTH (default file), CHROMIUM (default /usr/bin/chromium), SALTGUI_SHOTS (a
// directory for a screenshot of each page, optional).

import puppeteer from "puppeteer-core";

const base = process.env.SALTGUI_URL;
const user = process.env.SALTGUI_USER;
const pass = process.env.SALTGUI_PASS;
const eauth = process.env.SALTGUI_EAUTH || "file";
const shots = process.env.SALTGUI_SHOTS || "";
const minion = "m1";

// SaltGUI asks for these optional files and expects a 404 when a site has none.
const OPTIONAL = ["/static/minions.txt", "/static/salt-auth.txt", "/static/salt-motd.txt", "/static/salt-motd.html"];

const report = { checks: [], console: [], failures: [] };

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    // Each visit below loads SaltGUI afresh; a page kept in the back-forward cache would keep
    // its /events stream open, and six of them use up Chromium's connections to the host.
    "--disable-features=BackForwardCache",
  ],
});

try {
  const page = await browser.newPage();
  page.setDefaultTimeout(30000);
  page.on("console", (msg) => {
    const type = msg.type();
    if (type !== "error" && type !== "warn" && type !== "warning") {
      return;
    }
    const url = (msg.location() && msg.location().url) || "";
    if (OPTIONAL.some((p) => url.endsWith(p)) && msg.text().includes("404")) {
      return;
    }
    report.console.push(`${type}: ${msg.text()} (${url})`);
  });
  page.on("pageerror", (err) => report.console.push(`pageerror: ${err.message}`));
  page.on("response", async (resp) => {
    const url = new URL(resp.url());
    if (resp.status() >= 400 && !OPTIONAL.includes(url.pathname)) {
      let body = "";
      try {
        body = (await resp.text()).slice(0, 300);
      } catch (e) {
        body = "(no body)";
      }
      const sent = (resp.request().postData() || "").slice(0, 300);
      report.console.push(`HTTP ${resp.status()} for ${resp.request().method()} ${url.pathname} ${sent} -> ${body}`);
    }
  });

  // Wait until the element's text contains every one of `texts`.
  async function shows (name, selector, texts) {
    try {
      await page.waitForFunction(
        (sel, want) => {
          const el = document.querySelector(sel);
          if (!el || el.offsetParent === null) {
            return false;
          }
          const text = el.innerText;
          return want.every((w) => text.includes(w));
        },
        {},
        selector,
        texts,
      );
      report.checks.push(name);
    } catch (e) {
      const el = await page.$(selector);
      const text = el ? await page.evaluate((x) => x.innerText, el) : "(no element)";
      report.failures.push(`${name}: ${selector} never showed ${JSON.stringify(texts)}; it shows: ${text.slice(0, 600)}`);
    }
    if (shots) {
      await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
    }
  }

  // SaltGUI's own URLs: `/?<query>#<page>`.
  async function visit (hash, query = {}) {
    const q = new URLSearchParams(query).toString();
    await page.goto(`${base}/${q ? "?" + q : ""}#${hash}`, { waitUntil: "domcontentloaded" });
  }

  // Login: the browser's GET / gets SaltGUI itself (html_override).
  await page.goto(`${base}/`, { waitUntil: "domcontentloaded" });
  await page.waitForSelector("#username");
  await page.type("#username", user);
  await page.type("#password", pass);
  await page.select("#page-login select", eauth);
  await page.click("#login-button");
  await shows("minions", "#page-minions", [minion, "m2"]);

  await visit("keys");
  await shows("keys", "#page-keys", [minion, "m2", "accepted"]);

  // A test.ping from the command box, then the job in the jobs list and its detail page.
  await page.click("#button-manual-run");
  await page.waitForSelector("#target", { visible: true });
  await page.type("#target", minion);
  await page.type("#command", "test.ping");
  await page.click("#run-command");
  await shows("command-box", "#popup-output", [minion, "true"]);
  await page.click("#cmd-close-button");

  await visit("jobs");
  await shows("jobs", "#page-jobs", ["test.ping"]);
  const jid = await page.evaluate(() => {
    for (const tr of document.querySelectorAll("#page-jobs tr")) {
      if (tr.innerText.includes("test.ping") && /\d{20}/.test(tr.innerText)) {
        return tr.innerText.match(/\d{20}/)[0];
      }
    }
    return null;
  });
  if (jid) {
    await visit("job", { id: jid });
    await shows("job-detail", "#page-job", ["test.ping on " + minion, "1 success", minion + ":true"]);
  } else {
    report.failures.push("jobs: no test.ping row with a jid");
  }

  // The events page starts paused: press play, then m1's beacon events arrive.
  await visit("events");
  await page.waitForFunction(() => [...document.querySelectorAll("#page-events .small-button")]
    .some((b) => b.innerText.trim() === "\u2BC8" && b.offsetParent !== null));
  await page.evaluate(() => [...document.querySelectorAll("#page-events .small-button")]
    .find((b) => b.innerText.trim() === "\u2BC8" && b.offsetParent !== null).click());
  await shows("events", "#page-events", ["salt/beacon/" + minion + "/load/"]);

  await visit("grains");
  await shows("grains", "#page-grains", [minion, "m2"]);
  await visit("grains-minion", { minionid: minion });
  await shows("grains-minion", "#page-grains-minion", ["os", "saltversion"]);

  await visit("pillars");
  await shows("pillars", "#page-pillars", [minion]);
  await visit("pillars-minion", { minionid: minion });
  await shows("pillars-minion", "#page-pillars-minion", ["brine_role"]);

  await visit("schedules");
  await shows("schedules", "#page-schedules", [minion]);
  await visit("schedules-minion", { minionid: minion });
  await shows("schedules-minion", "#page-schedules-minion", ["nightly", "test.ping"]);

  await visit("beacons");
  await shows("beacons", "#page-beacons", [minion]);
  await visit("beacons-minion", { minionid: minion });
  await shows("beacons-minion", "#page-beacons-minion", ["load"]);

  await visit("mine");
  await shows("mine", "#page-mine", [minion]);
  await visit("mine-minion", { minionid: minion });
  await shows("mine-minion", "#page-mine-minion", ["test.ping", "greeting"]);
} catch (e) {
  report.failures.push(`driver: ${e.stack || e}`);
} finally {
  await browser.close();
}

if (report.console.length) {
  report.failures.push("the browser logged errors or warnings");
}
process.stdout.write(JSON.stringify(report, null, 2) + "\n");
process.exit(report.failures.length ? 1 : 0);
