// SPDX-License-Identifier: Apache-2.0
// The Sluice dashboard: polls the REST API (/v1) once a second with the
// account given in the login form (HTTP basic, kept in sessionStorage for
// this tab only) and draws the topology, services, a QPS chart and the
// query digests. Actions are the API's own writes (PUT .../set|clear,
// POST .../mariadbmon/switchover), so they need an admin account and pass
// the API's Origin check like any same-origin request. Every value from
// the API (statement texts included) is written with textContent, never
// as HTML.
"use strict";

const POLL_MS = 1000;
const HISTORY = 120;
const COLORS = ["#0b4f8a", "#b03a00", "#1e6b1e", "#6a1b9a", "#8a6d00"];

let auth = sessionStorage.getItem("sluice-auth");
let sortKey = "total_time";
let last = {servers: {}, services: {}, t: 0};
let history = {};           // server -> [qps...]
let latHistory = {};        // server -> [mean ms since the last refresh]
let lastSum = {};           // server -> response_time.sum (s)
let timer = null;

function $(id) { return document.getElementById(id); }

function say(msg, error) {
    const s = $("status");
    s.textContent = msg;
    s.className = error ? "error" : "";
}

async function api(method, path, quiet) {
    const res = await fetch("/v1/" + path, {
        method: method,
        headers: {"Authorization": "Basic " + auth},
        credentials: "omit",
    });
    if (res.status === 401) {
        logout("The account was refused.");
        throw new Error("unauthorised");
    }
    const text = await res.text();
    const doc = text ? JSON.parse(text) : null;
    if (!res.ok) {
        const detail = doc && doc.errors ? doc.errors[0].detail : res.status;
        if (!quiet) {
            say(method + " " + path + ": " + detail, true);
        }
        throw new Error(String(detail));
    }
    return doc;
}

function cell(tr, text, cls) {
    const td = document.createElement("td");
    td.textContent = text === undefined || text === null ? "" : String(text);
    if (cls) {
        td.className = cls;
    }
    tr.appendChild(td);
    return td;
}

function ms(seconds) {
    return (seconds * 1000).toFixed(2);
}

function role(state) {
    if (/Master/.test(state)) {
        return "primary";
    }
    if (/Slave/.test(state)) {
        return "replica";
    }
    return /Running/.test(state) ? "standalone" : "down";
}

function rate(kind, id, count, dt) {
    const prev = last[kind][id];
    return prev === undefined || dt <= 0 ? 0 : Math.max(0, (count - prev) / dt);
}

// Rows and controls are made once and then updated in place, so keyboard
// focus and a half-made choice survive the refresh every second.
function actionButton(server, state, label) {
    const b = document.createElement("button");
    b.type = "button";
    b.dataset.server = server;
    b.dataset.state = state;
    b.dataset.label = label;
    b.addEventListener("click", async () => {
        const on = b.dataset.on === "1";
        try {
            await api("PUT", "servers/" + encodeURIComponent(server) + "/" +
                      (on ? "clear" : "set") + "?state=" + state);
            say((on ? "Cleared " : "Set ") + label + " on " + server + ".");
            refresh();
        } catch (e) { /* said */ }
    });
    return b;
}

function setButton(b, on) {
    b.dataset.on = on ? "1" : "0";
    b.textContent = (on ? "Clear " : "Set ") + b.dataset.label;
    b.className = on ? "on" : "";
    b.setAttribute("aria-pressed", on ? "true" : "false");
}

function setText(td, text) {
    const t = text === undefined || text === null ? "" : String(text);
    if (td.textContent !== t) {
        td.textContent = t;
    }
}

function serverRow(body, id) {
    let tr = body.querySelector('tr[data-server="' + CSS.escape(id) + '"]');
    if (tr) {
        return tr;
    }
    tr = document.createElement("tr");
    tr.dataset.server = id;
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = id;
    tr.appendChild(th);
    for (const cls of ["", "role", "", "num", "", "num", "num qps", "num"]) {
        cell(tr, "", cls);
    }
    const act = cell(tr, "");
    act.appendChild(actionButton(id, "maintenance", "maintenance"));
    act.appendChild(document.createTextNode(" "));
    act.appendChild(actionButton(id, "drain", "drain"));
    body.appendChild(tr);
    return tr;
}

// Replace a select's options only when the list changed.
function setOptions(sel, items) {
    const now = Array.from(sel.options).map((o) => o.value + "\n" +
                                            o.textContent).join("\n");
    const want = items.map((i) => i[0] + "\n" + i[1]).join("\n");
    if (now === want) {
        return;
    }
    const chosen = sel.value;
    sel.textContent = "";
    for (const [value, text] of items) {
        const o = document.createElement("option");
        o.value = value;
        o.textContent = text;
        sel.appendChild(o);
    }
    if (items.some((i) => i[0] === chosen)) {
        sel.value = chosen;
    }
}

function drawServers(servers, dt) {
    const body = $("servers").tBodies[0];
    const ids = new Set(servers.map((s) => s.id));
    const targets = [];
    for (const tr of Array.from(body.rows)) {
        if (!ids.has(tr.dataset.server)) {
            tr.remove();
        }
    }
    for (const s of servers) {
        const a = s.attributes;
        const p = a.parameters || {};
        const rt = a.response_time || {count: 0, p95: 0};
        const qps = rate("servers", s.id, rt.count, dt);
        const tr = serverRow(body, s.id);
        const td = tr.cells;
        tr.className = /Maintenance/.test(a.state) ? "maint" : "";
        setText(td[1], (p.address || p.socket || "") +
                (p.port ? ":" + p.port : ""));
        setText(td[2], role(a.state));
        setText(td[3], a.state);
        setText(td[4], a.replication_lag < 0 ? "" : a.replication_lag);
        setText(td[5], a.gtid_current_pos || "");
        setText(td[6], a.statistics.connections);
        setText(td[7], qps.toFixed(1));
        setText(td[8], ms(rt.p95));
        const buttons = td[9].querySelectorAll("button");
        setButton(buttons[0], /Maintenance/.test(a.state));
        setButton(buttons[1], /Draining/.test(a.state));
        const dn = dt > 0 && last.servers[s.id] !== undefined
            ? rt.count - last.servers[s.id] : 0;
        const mean = dn > 0 && lastSum[s.id] !== undefined
            ? (rt.sum - lastSum[s.id]) * 1000 / dn : 0;
        lastSum[s.id] = rt.sum;
        (history[s.id] = history[s.id] || []).push(qps);
        (latHistory[s.id] = latHistory[s.id] || []).push(mean);
        for (const h of [history[s.id], latHistory[s.id]]) {
            if (h.length > HISTORY) {
                h.shift();
            }
        }
        last.servers[s.id] = rt.count;
        targets.push([s.id, s.id + " (" + role(a.state) + ")"]);
    }
    setOptions($("sw-target"), targets);
}

function drawServices(services, dt) {
    const body = $("services").tBodies[0];
    let total = 0;
    body.textContent = "";
    for (const s of services) {
        const a = s.attributes;
        const rt = a.response_time || {count: 0, p95: 0};
        const qps = rate("services", s.id, rt.count, dt);
        const tr = document.createElement("tr");
        const th = document.createElement("th");
        th.scope = "row";
        th.textContent = s.id;
        tr.appendChild(th);
        cell(tr, a.router);
        cell(tr, a.connections, "num");
        cell(tr, a.total_connections, "num");
        cell(tr, qps.toFixed(1), "num qps");
        cell(tr, ms(rt.p95), "num");
        const ls = ((s.relationships.listeners || {}).data || [])
            .map((l) => l.id).join(", ");
        cell(tr, ls);
        body.appendChild(tr);
        last.services[s.id] = rt.count;
        total += qps;
    }
    $("total-qps").textContent = total.toFixed(1);
}

// One line per server over the last HISTORY refreshes.
function drawChart(canvasId, legendId, hist, unit, digits) {
    const c = $(canvasId);
    const g = c.getContext("2d");
    const names = Object.keys(hist).sort();
    let max = 0;
    for (const n of names) {
        for (const v of hist[n]) {
            max = Math.max(max, v);
        }
    }
    max = max > 0 ? max * 1.1 : 1;
    g.fillStyle = "#ffffff";
    g.fillRect(0, 0, c.width, c.height);
    g.strokeStyle = "#8a8a8a";
    g.lineWidth = 1;
    g.strokeRect(50, 10, c.width - 60, c.height - 30);
    g.fillStyle = "#1b1b1b";
    g.font = "12px sans-serif";
    g.fillText(max.toFixed(digits), 4, 18);
    g.fillText("0", 4, c.height - 20);
    g.fillText(unit, 4, c.height / 2);
    const legend = $(legendId);
    legend.textContent = "";
    names.forEach((n, i) => {
        const h = hist[n];
        g.strokeStyle = COLORS[i % COLORS.length];
        g.lineWidth = 2;
        g.beginPath();
        h.forEach((v, k) => {
            const x = 50 + (c.width - 60) * (k + HISTORY - h.length) /
                (HISTORY - 1);
            const y = c.height - 20 - (c.height - 30) * v / max;
            if (k === 0) {
                g.moveTo(x, y);
            } else {
                g.lineTo(x, y);
            }
        });
        g.stroke();
        const li = document.createElement("li");
        const sw = document.createElement("span");
        sw.style.background = COLORS[i % COLORS.length];
        li.appendChild(sw);
        li.appendChild(document.createTextNode(
            n + ": " + (h.length ? h[h.length - 1].toFixed(digits) : "0") +
            " " + unit));
        legend.appendChild(li);
    });
}

function drawQueries(doc) {
    const body = $("queries").tBodies[0];
    body.textContent = "";
    for (const q of doc.data) {
        const a = q.attributes;
        const tr = document.createElement("tr");
        cell(tr, a.digest_text, "sql");
        cell(tr, a.count, "num");
        cell(tr, a.errors, "num");
        cell(tr, ms(a.total_time), "num");
        cell(tr, ms(a.avg_time), "num");
        cell(tr, ms(a.p95), "num");
        cell(tr, a.user);
        cell(tr, a.service);
        body.appendChild(tr);
    }
    for (const th of $("queries").tHead.rows[0].cells) {
        if (th.dataset.key && th.querySelector("button")) {
            th.setAttribute("aria-sort", th.dataset.key === sortKey
                            ? "descending" : "none");
        }
    }
}

function drawMonitors(monitors) {
    const sel = $("sw-monitor");
    setOptions(sel, monitors.filter((m) => m.attributes.module ===
                                    "mariadbmon").map((m) => [m.id, m.id]));
    $("sw-go").disabled = sel.options.length === 0;
}

async function refresh() {
    try {
        const now = performance.now() / 1000;
        const dt = last.t ? now - last.t : 0;
        const [servers, services, monitors, mx] = await Promise.all([
            api("GET", "servers"), api("GET", "services"),
            api("GET", "monitors"), api("GET", "maxscale")]);
        last.t = now;
        $("version").textContent = "Version " + mx.data.attributes.version +
            ", up " + mx.data.attributes.uptime + " s";
        drawServers(servers.data, dt);
        drawServices(services.data, dt);
        drawMonitors(monitors.data);
        drawChart("chart", "legend", history, "QPS", 1);
        drawChart("lat-chart", "lat-legend", latHistory, "ms", 2);
        try {
            drawQueries(await api("GET", "sluice/queries?limit=50&sort=" +
                                  sortKey, true));
        } catch (e) {
            $("queries").tBodies[0].textContent = "";
        }
    } catch (e) {
        if (e.message !== "unauthorised") {
            say("Cannot reach the REST API: " + e.message, true);
        }
    }
}

function start() {
    $("login-view").hidden = true;
    $("app").hidden = false;
    $("logout").hidden = false;
    refresh();
    timer = setInterval(refresh, POLL_MS);
}

function logout(msg) {
    clearInterval(timer);
    sessionStorage.removeItem("sluice-auth");
    auth = null;
    $("app").hidden = true;
    $("logout").hidden = true;
    $("login-view").hidden = false;
    if (msg) {
        $("login-h").textContent = "Log in — " + msg;
    }
    $("user").focus();
}

document.addEventListener("DOMContentLoaded", () => {
    $("login").addEventListener("submit", (ev) => {
        ev.preventDefault();
        auth = btoa($("user").value + ":" + $("password").value);
        sessionStorage.setItem("sluice-auth", auth);
        start();
    });
    $("logout").addEventListener("click", () => logout());
    $("switchover").addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const mon = $("sw-monitor").value;
        const target = $("sw-target").value;
        $("sw-go").disabled = true;
        say("Switching over to " + target + "...");
        try {
            await api("POST", "maxscale/modules/mariadbmon/switchover?" +
                      encodeURIComponent(mon) + "&" +
                      encodeURIComponent(target));
            say("Switchover to " + target + " done.");
        } catch (e) { /* said */ }
        $("sw-go").disabled = false;
        refresh();
    });
    $("reset-queries").addEventListener("click", async () => {
        try {
            await api("DELETE", "sluice/queries");
            say("Query digests reset.");
            refresh();
        } catch (e) { /* said */ }
    });
    for (const b of document.querySelectorAll("button[data-sort]")) {
        b.addEventListener("click", () => {
            sortKey = b.dataset.sort;
            refresh();
        });
    }
    if (auth) {
        start();
    } else {
        $("user").focus();
    }
});
