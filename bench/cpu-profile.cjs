// Preloaded into benchmark replicas to record a CPU profile of each (NODE_OPTIONS does not accept
// --cpu-prof): NODE_OPTIONS="--require $PWD/bench/cpu-profile.cjs" ROLLCALL_CPU_PROFILE_DIR=/some/dir
// bench/run recovery ...; then node bench/cpu-profile-summary.mjs /some/dir [count] [lastSeconds].
const inspector = require('node:inspector');
const fs = require('node:fs');
const path = require('node:path');

const dir = process.env.ROLLCALL_CPU_PROFILE_DIR;
if (dir) {
  const session = new inspector.Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.setSamplingInterval', { interval: 500 });
  session.post('Profiler.start');
  // A session on the main thread answers synchronously, so the profile is written before exit.
  process.on('exit', () => {
    session.post('Profiler.stop', (error, result) => {
      if (error) return;
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, `${Date.now()}-${process.pid}.cpuprofile`), JSON.stringify(result.profile));
    });
  });
}
