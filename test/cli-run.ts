// Runs the operator CLI as an operator does (`node dist/cli.js`, built by `make test`).
import { spawn } from 'node:child_process'

const CLI = new URL('../dist/cli.js', import.meta.url).pathname

export function runCli(env: Record<string, string>, ...args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: 'pipe' })
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
