// Reads lines on stdin, timestamps each on arrival (process.hrtime), and prints the pacing
// figures as one JSON line: count, span, rate, rate error vs the target, gap statistics.
//   floodgate pace --limit 20/second < lines | node gaps.js 20
if (require.main === module) {
  const target = Number(process.argv[2] || 20);
  const times = [];
  let buffered = '';
  process.stdin.on('data', (chunk) => {
    const now = process.hrtime.bigint();
    buffered += chunk.toString();
    let i;
    while ((i = buffered.indexOf('\n')) >= 0) {
      buffered = buffered.slice(i + 1);
      times.push(now);
    }
  });
  process.stdin.on('end', () => console.log(JSON.stringify(summary(times, target))));
}

function summary(times, target) {
  const gaps = [];
  for (let i = 1; i < times.length; i++) gaps.push(Number(times[i] - times[i - 1]) / 1e6);
  const span = Number(times[times.length - 1] - times[0]) / 1e9;
  const rate = (times.length - 1) / span;
  const ideal = 1000 / target;
  const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
  const sd = Math.sqrt(gaps.reduce((a, g) => a + (g - mean) ** 2, 0) / gaps.length);
  const sorted = [...gaps].sort((a, b) => a - b);
  const worst = Math.max(...gaps.map((g) => Math.abs(g - ideal)));
  return {
    count: times.length, span_s: +span.toFixed(4), rate: +rate.toFixed(3),
    rate_error_pct: +((100 * (rate - target)) / target).toFixed(3),
    gap_mean_ms: +mean.toFixed(3), gap_sd_ms: +sd.toFixed(3), gap_min_ms: +sorted[0].toFixed(3),
    gap_p99_ms: +sorted[Math.floor(0.99 * (sorted.length - 1))].toFixed(3),
    gap_max_ms: +sorted[sorted.length - 1].toFixed(3), worst_gap_error_ms: +worst.toFixed(3),
  };
}
module.exports = { summary };
