// Keeps the policy form's memory estimate in step with the algorithm and limit fields.
// The figures come from ratelimits/tools/memory.py through the element's data-points
// attribute.
(function () {
  "use strict";

  function human(size) {
    if (size < 1000) return size + " B";
    if (size < 1000000) return (size / 1000).toFixed(1) + " KB";
    return (size / 1000000).toFixed(1) + " MB";
  }

  function bytesPerClient(points, algorithm, limit) {
    var log = points.logs[algorithm] || (algorithm === "concurrency" ? points.leases : null);
    if (!log) return algorithm === "token_bucket" ? points.bucket : points.counter;
    if (limit <= log[0][0]) return log[0][1];
    for (var i = 1; i < log.length; i++) {
      if (limit <= log[i][0] || i === log.length - 1) {
        var x0 = log[i - 1][0], y0 = log[i - 1][1], x1 = log[i][0], y1 = log[i][1];
        return Math.round(y0 + (y1 - y0) * (limit - x0) / (x1 - x0));
      }
    }
    return log[log.length - 1][1];
  }

  function update() {
    var box = document.getElementById("ratelimits-memory");
    var algorithm = document.getElementById("id_algorithm");
    var limitField = document.getElementById("id_limit");
    if (!box || !algorithm || !limitField) return;
    var points = JSON.parse(box.dataset.points);
    var limit = parseInt(limitField.value, 10);
    box.textContent = "";
    if (!(limit >= 1)) {
      box.textContent = "Set a limit to see the estimate.";
      return;
    }
    var size = bytesPerClient(points, algorithm.value, limit);
    box.append("About ");
    var strong = document.createElement("strong");
    strong.textContent = human(size);
    var at = algorithm.value === "concurrency" ? " in progress at once)." : " per window).";
    box.append(strong, " of Redis memory per active client (" + algorithm.value + " at " +
      limit + at);
    // Only a log has a smaller algorithm to suggest.
    if (points.logs[algorithm.value] && size > points.large) {
      var warning = document.createElement("p");
      warning.className = "errornote ratelimits-memory-warning";
      var compact = bytesPerClient(points, "compact_log", limit);
      if (algorithm.value === "sliding_log" && compact <= points.large) {
        warning.textContent = "A log this long is large: consider compact_log (exact too, " +
          "about " + human(compact) + ") or sliding_counter (about " + human(points.counter) +
          ", approximate).";
      } else {
        warning.textContent = "A log this long is large: consider sliding_counter (about " +
          human(points.counter) + " at any limit, approximate).";
      }
      box.append(warning);
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    ["id_algorithm", "id_limit"].forEach(function (id) {
      var field = document.getElementById(id);
      if (field) {
        field.addEventListener("input", update);
        field.addEventListener("change", update);
      }
    });
  });
})();
