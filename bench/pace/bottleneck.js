// Bottleneck (the usual Node client-side throttle) at the same rate: 200 jobs, minTime 1000/R ms,
// one at a time; each job's start time is the "emission". Prints the same figures as gaps.js.
const Bottleneck = require('bottleneck');
const { summary } = require('./gaps.js');
const rate = Number(process.argv[2] || 20);
const n = Number(process.argv[3] || 200);
const limiter = new Bottleneck({ maxConcurrent: 1, minTime: 1000 / rate });
const times = [];
const jobs = [];
for (let i = 0; i < n; i++) jobs.push(limiter.schedule(async () => { times.push(process.hrtime.bigint()); }));
Promise.all(jobs).then(() => console.log(JSON.stringify(summary(times, rate))));
