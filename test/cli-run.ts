// Runs the operator CLI as an operator does (`node dist/cli/index.js`, built by `make test`).
import { spawn } from 'node:child_process'

const CLI = new URL('../dist/cli/index.js', import.meta.url).pathname

export function runCli(env: Record<string, string>, ...args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return runProcess(process.execPath, [CLI, ...args], { env })
}

/** runs `cmd` with only PATH and `env` set, killed after 60 s; its exit code and both outputs */
export function runProcess(
  cmd: string,
  args: string[],
  opts: { env?: Record<string, string>; cwd?: string },
): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: { PATH: process.env.PATH ?? '', ...opts.env }, stdio: 'pipe' })
    let out = ''
    let err = ''
    child.stdout.on('data', (c) => (out += c))
    child.stderr.on('data', (c) => (err += c))
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
    child.on('exit', (code) => {
      clearTimeout(timer)
      resolve({ code, out, err })
    })
  })
}
