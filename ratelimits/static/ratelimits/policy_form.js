// The policy form: keeps the memory estimate (and the Redis work per request beside it)
// in step with the algorithm, limit, calendar
// and lockout fields, and shows the window or the calendar's time zone, whichever applies.
// The figures come from ratelimits/tools/memory.py through the estimate's data-points
// attribute; a calendar period's window (its nominal length, which the model sets) from
// the calendar field's data-windows attribute.
(function () {
  "use strict";

  function human(size) {
    if (size < 1000) return size + " B";
    if (size < 1000000) return (size / 1000).toFixed(1) + " KB";
    return (size / 1000000).toFixed(1) + " MB";
  }

  // As ratelimits.engine.describe.describe_duration: "15 min", "2 h", "1 day", "90 s".
  function duration(seconds) {
    var units = [[86400, "day"], [3600, "h"], [60, "min"]];
    for (var i = 0; i < units.length; i++) {
      var size = units[i][0], unit = units[i][1];
      if (seconds >= size && seconds % size === 0) {
        var count = seconds / size;
        return count + " " + unit + (unit === "day" && count > 1 ? "s" : "");
      }
    }
    return seconds + " s";
  }

  // An algorithm's size: one figure, or measured points (entries, bytes) to interpolate.
  function bytesPerClient(points, algorithm, limit) {
    var log = points.sizes[algorithm];
    if (log === undefined) return points.counter;
    if (typeof log === "number") return log;
    if (limit <= log[0][0]) return log[0][1];
    for (var i = 1; i < log.length; i++) {
      if (limit <= log[i][0] || i === log.length - 1) {
        var x0 = log[i - 1][0], y0 = log[i - 1][1], x1 = log[i][0], y1 = log[i][1];
        return Math.round(y0 + (y1 - y0) * (limit - x0) / (x1 - x0));
      }
    }
    return log[log.length - 1][1];
  }

  function value(id) {
    var field = document.getElementById(id);
    return field ? field.value : "";
  }

  function update() {
    var box = document.getElementById("ratelimits-memory");
    var algorithm = document.getElementById("id_algorithm");
    var limitField = document.getElementById("id_limit");
    if (!box || !algorithm || !limitField) return;
    var points = JSON.parse(box.dataset.points);
    var limit = parseInt(limitField.value, 10);
    var calendar = value("id_calendar");
    var lockout = parseInt(value("id_lockout"), 10);
    box.textContent = "";
    if (!(limit >= 1)) {
      box.textContent = "Set a limit to see the estimate.";
      return;
    }
    var size = bytesPerClient(points, algorithm.value, limit);
    var kept = points.kept[calendar];
    box.append("About ");
    var strong = document.createElement("strong");
    strong.textContent = human(size);
    var at = " per window).";
    if (points.released.indexOf(algorithm.value) >= 0) at = " in progress at once).";
    else if (kept) at = " per calendar " + calendar + ").";
    box.append(strong, " of Redis memory per active client (" + algorithm.value + " at " +
      limit + at);
    if (kept) {
      box.append(" A count is kept until its calendar " + calendar + " ends (up to " + kept +
        "): every client seen in the " + calendar + " is an active client.");
    }
    if (lockout > 0) {
      var lock = document.createElement("strong");
      lock.textContent = human(points.lock);
      box.append(" A locked-out client adds about ", lock, " for its lock, kept " +
        duration(lockout) + ".");
    }
    // Only a log has a smaller algorithm to suggest.
    if (points.logs[algorithm.value] && size > points.large) {
      var warning = document.createElement("p");
      warning.className = "errornote ratelimits-memory-warning";
      // Another log, smaller and not large itself, as ratelimits/admin/widgets.py says.
      var other = null;
      Object.keys(points.logs).forEach(function (log) {
        var bytes = bytesPerClient(points, log, limit);
        if (!other && log !== algorithm.value && bytes <= points.large && bytes < size) {
          other = [log, bytes];
        }
      });
      if (other) {
        warning.textContent = "A log this long is large: consider " + other[0] + " (exact " +
          "too, about " + human(other[1]) + ") or sliding_counter (about " +
          human(points.counter) + ", approximate).";
      } else {
        warning.textContent = "A log this long is large: consider sliding_counter (about " +
          human(points.counter) + " at any limit, approximate).";
      }
      box.append(warning);
    }
    // Redis work per request, as ratelimits/admin/widgets.py work_text says it.
    var work = points.work[algorithm.value] || points.work.sliding_counter;
    var line = document.createElement("p");
    line.className = "ratelimits-work";
    var order = document.createElement("strong");
    order.textContent = work[0];
    line.append("Redis work per request: ", order, " (" + work[1] +
      "), whatever the request's cost.");
    box.append(line);
    if (points.logs[algorithm.value] && limit >= points.largeWork) {
      var heavy = document.createElement("p");
      heavy.className = "errornote ratelimits-work-warning";
      heavy.textContent = "A log of up to " + limit + " entries: a denied request searches " +
        "it (about " + Math.max(1, limit.toString(2).length) + " steps), and giving back a " +
        "request (counts other than all) renumbers the entries admitted during its " +
        "response. sliding_counter does O(1) work at any limit.";
      box.append(heavy);
    }
  }

  function row(field) {
    return field.closest(".form-row") || field.parentNode;
  }

  // With a calendar period the window is the period's (the model sets it): its row is
  // hidden and holds that value, the one typed kept for a switch back to a rolling window.
  // The time zone is a calendar's only: without one its row is hidden and not sent.
  function showPeriodFields() {
    var calendar = document.getElementById("id_calendar");
    var window_ = document.getElementById("id_window");
    var zone = document.getElementById("id_time_zone");
    if (!calendar) return;
    var windows = JSON.parse(calendar.dataset.windows || "{}");
    var period = windows[calendar.value];
    if (window_) {
      if (period) {
        if (!window_.readOnly) window_.dataset.typed = window_.value;
        window_.value = period;
        window_.readOnly = true;
      } else if (window_.readOnly) {
        window_.value = window_.dataset.typed || "";
        window_.readOnly = false;
      }
      row(window_).hidden = Boolean(period);
    }
    if (zone) {
      zone.disabled = !period;
      row(zone).hidden = !period;
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    showPeriodFields();
    var calendar = document.getElementById("id_calendar");
    if (calendar) calendar.addEventListener("change", showPeriodFields);
    ["id_algorithm", "id_limit", "id_calendar", "id_lockout"].forEach(function (id) {
      var field = document.getElementById(id);
      if (field) {
        field.addEventListener("input", update);
        field.addEventListener("change", update);
      }
    });
  });
})();
