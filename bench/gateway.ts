/**
 * The gateway's cost, side by side with its anchors in one run:
 *
 *   npm run bench:gateway     (BENCH_MODEL_RUNS, default 100; BENCH_BYTES, default 1000000;
 *                              BENCH_GIT_RUNS, default 5; BENCH_MB, default 50)
 *
 *   model  a streamed ~1 MB SSE answer through the daemon's gateway (listener, token check, the
 *          model handler: bench/gateway-model.ts) against the same request straight to the mock
 *          upstream; goals: total ≤ 1.1× and time to first byte ≤ +1 ms, at p50.
 *   git    a 50 MB push through the git handler (bench/gateway-git.ts) against the same push
 *          straight to `git http-backend`; goal: ≤ 1.2× at the median.
 *
 * Each part also prints its floor where it has one: a bare node:http relay in the gateway's
 * process, what any proxy hop written in Node costs on this machine. Other load on the machine
 * skews every figure, so the load average before each part is printed with it. Figures are printed,
 * never asserted.
 */
import { cpus, loadavg } from 'node:os';
import { benchGatewayGit, printGatewayGit } from './gateway-git.js';
import { benchGatewayModel, printGatewayModel, type ScenarioFigures } from './gateway-model.js';

const verdict = (met: boolean) => (met ? 'met' : 'NOT met');

function modelGoals(name: string, s: ScenarioFigures): string[] {
  const ms = (n: number) => `${n >= 0 ? '+' : ''}${n.toFixed(2)} ms`;
  return [
    `model ${name.padEnd(6)} total  ${s.totalRatio.toFixed(3)}× direct (goal ≤ 1.1×): ${verdict(s.totalRatio <= 1.1)}` +
      `   [floor ${s.floorRatio.toFixed(3)}×; gateway ${s.totalVsFloor.toFixed(3)}× floor]`,
    `model ${name.padEnd(6)} TTFB   ${ms(s.ttfbDeltaMs)} (goal ≤ +1 ms): ${verdict(s.ttfbDeltaMs <= 1)}` +
      `   [floor ${ms(s.floorTtfbDeltaMs)}]`,
  ];
}

async function main(): Promise<void> {
  console.log(
    `gateway bench: ${cpus().length} CPUs, load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} before the run; node ${process.version}\n`,
  );
  const model = await benchGatewayModel({
    runs: Number(process.env.BENCH_MODEL_RUNS ?? 100),
    bytes: Number(process.env.BENCH_BYTES ?? 1_000_000),
  });
  printGatewayModel(model);
  console.log('');
  const git = await benchGatewayGit({
    runs: Number(process.env.BENCH_GIT_RUNS ?? 5),
    megabytes: Number(process.env.BENCH_MB ?? 50),
  });
  printGatewayGit(git);

  console.log('\ngoals (p50 / median, this run)');
  for (const line of [
    ...modelGoals('burst', model.scenarios.burst),
    ...modelGoals('paced', model.scenarios.paced),
  ])
    console.log(`  ${line}`);
  console.log(`  git push     ${git.ratio.toFixed(3)}× direct (goal ≤ 1.2×): ${verdict(git.ratio <= 1.2)}`);
  const bad = model.rows.recorded !== model.rows.expected || git.acts.succeeded !== git.acts.expected;
  if (bad) console.log('  WARNING: the gateway did not record every wire row or act (see above)');
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
