// Throws an Error from 1000 frames deep and catches it at the top, 300 times.
function f(n) {
    if (n > 0) return f(n - 1);
    throw new Error("deep");
}
let caught = 0;
for (let i = 0; i < 300; i++) {
    try { f(1000); } catch (e) { caught++; }
}
print(caught);
