// Click a header to sort its table by that column; click again to reverse.
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th.sortable").forEach(function (th, _) {
    th.addEventListener("click", function () {
      var index = Array.prototype.indexOf.call(th.parentNode.children, th);
      var numeric = th.dataset.type === "number";
      var dir = th.getAttribute("aria-sort") === "descending" ? 1 : -1;
      if (!th.hasAttribute("aria-sort")) dir = numeric ? -1 : 1;
      table.querySelectorAll("th").forEach(function (o) { o.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[index].dataset.value, y = b.cells[index].dataset.value;
        if (x === undefined) x = a.cells[index].textContent.trim();
        if (y === undefined) y = b.cells[index].textContent.trim();
        if (x === "" && y === "") return 0;
        if (x === "") return 1;  // missing values last, either way
        if (y === "") return -1;
        if (numeric) return dir * (parseFloat(x) - parseFloat(y));
        return dir * x.localeCompare(y);
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
document.querySelectorAll("form.compare-form").forEach(function (form) {
  var button = form.querySelector("button[type=submit]");
  function update() {
    var n = form.querySelectorAll("input[name=ids]:checked").length;
    button.disabled = n < 2;
    button.textContent = n < 2 ? "Select 2+ experiments to compare" : "Compare " + n + " experiments";
  }
  form.addEventListener("change", update);
  update();
});
