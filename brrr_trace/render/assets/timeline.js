// brrr-trace timeline: draws the segments of render/html.py's timeline fragment on a canvas.
// Works the same in the standalone HTML report and in an editor webview (docs/html-report.md):
//   out: {type: "reveal", path, file, line, function, kind} when a kernel or gap is clicked,
//        to the VS Code webview API when there is one, else to the parent window when framed;
//        always also a "brrr:reveal" CustomEvent (bubbling) on the timeline's element;
//   in:  {type: "highlight", path, line} as a window message or a "brrr:highlight" event on
//        the element outlines that line's segments; {type: "highlight", path: null} clears;
//        {type: "zoom", start_ns, end_ns} (or a "brrr:zoom" event) shows that window.
// Every trace string is written with textContent, never as markup.
(function () {
  "use strict";

  var COLOURS = {
    busy: "#3567c9",
    sync: "#d33f3f",
    dataloader: "#e0861b",
    host: "#c4a000",
    launch: "#8d62cf",
    other: "#9aa0a6",
    collective: "#2a9d8f",
  };
  var LANE = 34;
  var AXIS = 18;
  var vscode = null;
  try {
    if (typeof acquireVsCodeApi === "function") {
      vscode = acquireVsCodeApi(); // callable once per webview
    }
  } catch (e) {
    vscode = null;
  }

  function duration(ns) {
    var a = Math.abs(ns);
    if (a < 1e3) return ns.toFixed(0) + " ns";
    if (a < 1e6) return (ns / 1e3).toFixed(1) + " µs";
    if (a < 1e9) return (ns / 1e6).toFixed(2) + " ms";
    return (ns / 1e9).toFixed(3) + " s";
  }

  function post(root, message) {
    if (vscode) {
      vscode.postMessage(message);
    } else if (window.parent && window.parent !== window) {
      window.parent.postMessage(message, "*");
    }
    root.dispatchEvent(new CustomEvent("brrr:reveal", { detail: message, bubbles: true }));
  }

  // The first index i with starts[i] > t, minus one: the segment that holds t.
  function segmentAt(starts, t) {
    var lo = 0;
    var hi = starts.length;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (starts[mid] <= t) lo = mid + 1;
      else hi = mid;
    }
    return lo - 1;
  }

  function Timeline(root, data) {
    this.root = root;
    this.data = data;
    this.span = Math.max(1, Math.max.apply(null, data.devices.map(function (d) { return d.span_ns; }).concat([1])));
    this.view0 = 0;
    this.view1 = this.span;
    this.selected = null; // [device index, segment index]
    this.marked = {}; // place index -> true
    this.build();
    this.draw();
  }

  Timeline.prototype.build = function () {
    var self = this;
    var bar = document.createElement("div");
    bar.className = "brrr-tl-bar";
    [["−", function () { self.zoom(2, 0.5); }], ["+", function () { self.zoom(0.5, 0.5); }],
     ["reset", function () { self.show(0, self.span); }]].forEach(function (b) {
      var button = document.createElement("button");
      button.type = "button";
      button.textContent = b[0];
      button.addEventListener("click", b[1]);
      bar.appendChild(button);
    });
    this.range = document.createElement("span");
    this.range.className = "brrr-tl-range";
    bar.appendChild(this.range);
    this.root.appendChild(bar);
    this.canvas = document.createElement("canvas");
    this.canvas.className = "brrr-tl-canvas";
    this.canvas.tabIndex = 0;
    this.canvas.setAttribute("role", "img");
    this.canvas.setAttribute("aria-label", "GPU timeline: busy kernels and idle gaps by cause");
    this.root.appendChild(this.canvas);
    this.detail = document.createElement("div");
    this.detail.className = "brrr-tl-detail";
    this.detail.textContent = "Click a kernel or a gap to see its line. Wheel: zoom, drag: pan.";
    this.root.appendChild(this.detail);

    var drag = null;
    this.canvas.addEventListener("wheel", function (e) {
      e.preventDefault();
      var r = self.canvas.getBoundingClientRect();
      self.zoom(e.deltaY > 0 ? 1.25 : 0.8, (e.clientX - r.left) / Math.max(1, r.width));
    }, { passive: false });
    this.canvas.addEventListener("pointerdown", function (e) {
      drag = { x: e.clientX, v0: self.view0, v1: self.view1, moved: false };
      try {
        self.canvas.setPointerCapture(e.pointerId);
      } catch (err) {
        // a synthetic event's pointer cannot be captured; dragging still works inside
      }
    });
    this.canvas.addEventListener("pointermove", function (e) {
      if (!drag) return;
      var dx = e.clientX - drag.x;
      if (Math.abs(dx) > 3) drag.moved = true;
      if (!drag.moved) return;
      var per = (drag.v1 - drag.v0) / Math.max(1, self.canvas.getBoundingClientRect().width);
      self.show(drag.v0 - dx * per, drag.v1 - dx * per);
    });
    this.canvas.addEventListener("pointerup", function (e) {
      var was = drag;
      drag = null;
      if (was && !was.moved) self.pick(e);
    });
    this.canvas.addEventListener("keydown", function (e) {
      var w = self.view1 - self.view0;
      if (e.key === "+" || e.key === "=") self.zoom(0.5, 0.5);
      else if (e.key === "-") self.zoom(2, 0.5);
      else if (e.key === "0") self.show(0, self.span);
      else if (e.key === "ArrowLeft") self.show(self.view0 - w / 4, self.view1 - w / 4);
      else if (e.key === "ArrowRight") self.show(self.view0 + w / 4, self.view1 + w / 4);
      else return;
      e.preventDefault();
    });
    this.root.addEventListener("brrr:highlight", function (e) { self.highlight(e.detail || {}); });
    this.root.addEventListener("brrr:zoom", function (e) {
      var d = e.detail || {};
      if (typeof d.start_ns === "number" && typeof d.end_ns === "number") self.show(d.start_ns, d.end_ns);
    });
    window.addEventListener("resize", function () { self.draw(); });
  };

  Timeline.prototype.show = function (v0, v1) {
    var w = Math.max(1000, Math.min(v1 - v0, this.span * 1.1));
    v0 = Math.max(-this.span * 0.05, Math.min(v0, this.span * 1.05 - w));
    this.view0 = v0;
    this.view1 = v0 + w;
    this.draw();
  };

  Timeline.prototype.zoom = function (factor, at) {
    var w = this.view1 - this.view0;
    var t = this.view0 + w * at;
    this.show(t - w * factor * at, t + w * factor * (1 - at));
  };

  Timeline.prototype.draw = function () {
    var devices = this.data.devices;
    var ratio = window.devicePixelRatio || 1;
    var cssWidth = Math.max(200, this.root.clientWidth || 800);
    var cssHeight = AXIS + LANE * Math.max(1, devices.length) + ((this.data.steps || []).length ? 16 : 4);
    this.canvas.width = Math.round(cssWidth * ratio);
    this.canvas.height = Math.round(cssHeight * ratio);
    this.canvas.style.width = cssWidth + "px";
    this.canvas.style.height = cssHeight + "px";
    var g = this.canvas.getContext("2d");
    if (!g) return;
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, cssWidth, cssHeight);
    var v0 = this.view0;
    var per = cssWidth / (this.view1 - this.view0);
    var causes = this.data.causes;
    this.drawAxis(g, cssWidth, per);
    for (var d = 0; d < devices.length; d++) {
      var dev = devices[d];
      var top = AXIS + d * LANE + 2;
      var h = LANE - 8;
      var first = Math.max(0, segmentAt(dev.start, v0));
      for (var i = first; i < dev.start.length && dev.start[i] < this.view1; i++) {
        var x0 = (dev.start[i] - v0) * per;
        var x1 = (dev.end[i] - v0) * per;
        var w = Math.max(x1 - x0, 0.6);
        var kind = dev.kind[i];
        var idle = dev.cause[i] >= 0 ? COLOURS[causes[dev.cause[i]]] : COLOURS.other;
        if (kind === 0) {
          g.fillStyle = COLOURS.busy;
          g.fillRect(x0, top, w, h);
        } else if (kind === 1) {
          g.fillStyle = idle;
          g.fillRect(x0, top, w, h);
        } else {
          // merged: the busy share drawn from the bottom, the idle above it
          var len = Math.max(1, dev.end[i] - dev.start[i]);
          var bh = h * Math.min(1, dev.busy[i] / len);
          g.fillStyle = idle;
          g.globalAlpha = 0.55;
          g.fillRect(x0, top, w, h - bh);
          g.globalAlpha = 1;
          g.fillStyle = COLOURS.busy;
          g.fillRect(x0, top + h - bh, w, bh);
        }
        if (this.marked[dev.place[i]]) {
          g.fillStyle = "#111";
          g.fillRect(x0, top + h + 1, Math.max(w, 2), 4);
        }
      }
      if (this.selected && this.selected[0] === d) {
        var s = this.selected[1];
        g.strokeStyle = "#000";
        g.lineWidth = 2;
        g.strokeRect((dev.start[s] - v0) * per - 1, top - 1, Math.max((dev.end[s] - dev.start[s]) * per, 1) + 2, h + 2);
      }
    }
    var steps = this.data.steps || [];
    g.strokeStyle = "rgba(0,0,0,0.45)";
    g.lineWidth = 1;
    for (var k = 0; k < steps.length; k++) {
      var sx = (steps[k].start_ns - v0) * per;
      var ex = (steps[k].end_ns - v0) * per;
      if (ex < 0 || sx > cssWidth) continue;
      if (sx >= 0) {
        g.beginPath();
        g.moveTo(sx + 0.5, AXIS - 4);
        g.lineTo(sx + 0.5, cssHeight);
        g.stroke();
      }
      g.fillStyle = "#333";
      g.fillText("step " + (k + 1), Math.max(sx, 0) + 3, AXIS + LANE * devices.length + 10);
    }
    this.root.setAttribute("data-drawn", String(devices.reduce(function (n, dv) { return n + dv.start.length; }, 0)));
    this.range.textContent = duration(this.view0) + " – " + duration(this.view1) + " (" + duration(this.view1 - this.view0) + " shown)";
  };

  Timeline.prototype.drawAxis = function (g, width, per) {
    var w = this.view1 - this.view0;
    var step = Math.pow(10, Math.floor(Math.log10(Math.max(1, w / 6))));
    if (w / step > 12) step *= 5;
    else if (w / step > 6) step *= 2;
    g.fillStyle = "#444";
    g.font = "11px sans-serif";
    g.strokeStyle = "#ccc";
    for (var t = Math.ceil(this.view0 / step) * step; t < this.view1; t += step) {
      var x = (t - this.view0) * per;
      g.fillRect(x, AXIS - 5, 1, 4);
      g.fillText(duration(t), x + 2, AXIS - 7);
    }
  };

  Timeline.prototype.pick = function (e) {
    var r = this.canvas.getBoundingClientRect();
    var d = Math.floor((e.clientY - r.top - AXIS) / LANE);
    var dev = this.data.devices[d];
    if (!dev) return;
    var per = (this.view1 - this.view0) / Math.max(1, r.width);
    var t = this.view0 + (e.clientX - r.left) * per;
    var i = segmentAt(dev.start, t);
    if (i < 0 || dev.end[i] < t - 3 * per) return;
    this.select(d, i);
  };

  Timeline.prototype.select = function (d, i) {
    this.selected = [d, i];
    this.draw();
    var dev = this.data.devices[d];
    var kind = ["kernel", "gap", "mixed"][dev.kind[i]];
    var place = dev.place[i] >= 0 ? this.data.places[dev.place[i]] : null;
    var name = dev.name[i] >= 0 ? this.data.names[dev.name[i]] : "";
    var cause = dev.cause[i] >= 0 ? this.data.causes[dev.cause[i]] : "";
    var len = dev.end[i] - dev.start[i];
    var what;
    if (kind === "kernel") what = "Kernel " + name;
    else if (kind === "gap") what = "Idle gap (" + cause + ")";
    else what = dev.ops_in[i] + " kernels and " + dev.gaps_in[i] + " gaps merged (busy " + duration(dev.busy[i]) + ")" + (name ? "; mostly " + name : "") + (cause ? "; idle mostly " + cause : "");
    var where = place ? place[0] + ":" + place[2] + " " + place[3] : "no source line";
    this.detail.textContent = "";
    var head = document.createElement("div");
    head.textContent = what + " — " + duration(len) + " at " + duration(dev.start[i]);
    var line = document.createElement("div");
    line.className = "brrr-tl-where";
    line.textContent = where;
    this.detail.appendChild(head);
    this.detail.appendChild(line);
    if (place) {
      post(this.root, { type: "reveal", path: place[1], file: place[0], line: place[2], "function": place[3], kind: kind });
    }
  };

  Timeline.prototype.highlight = function (message) {
    this.marked = {};
    var count = 0;
    if (typeof message.path === "string" && typeof message.line === "number") {
      var places = this.data.places;
      for (var p = 0; p < places.length; p++) {
        if ((places[p][1] === message.path || places[p][0] === message.path) && places[p][2] === message.line) {
          this.marked[p] = true;
          count++;
        }
      }
    }
    var segments = 0;
    this.data.devices.forEach(function (dev) {
      dev.place.forEach(function (p) { if (this.marked[p]) segments++; }, this);
    }, this);
    this.root.setAttribute("data-highlighted", String(segments));
    this.draw();
    return count;
  };

  var timelines = [];
  function start() {
    var roots = document.querySelectorAll(".brrr-timeline");
    for (var i = 0; i < roots.length; i++) {
      var source = roots[i].querySelector("script.brrr-timeline-data");
      if (!source) continue;
      try {
        timelines.push(new Timeline(roots[i], JSON.parse(source.textContent)));
      } catch (err) {
        roots[i].textContent = "The timeline could not be drawn (" + err + ").";
      }
    }
  }
  window.addEventListener("message", function (e) {
    var m = e.data;
    if (!m || typeof m !== "object") return;
    for (var i = 0; i < timelines.length; i++) {
      if (m.type === "highlight") timelines[i].highlight(m);
      else if (m.type === "zoom" && typeof m.start_ns === "number" && typeof m.end_ns === "number") timelines[i].show(m.start_ns, m.end_ns);
    }
  });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
