// Terminal prompts for the CLI: a line from stdin, echo off for secrets. Without a terminal,
// nothing is asked and the answer is undefined.
import { createInterface } from 'node:readline'
import { Writable } from 'node:stream'

export async function ask(question: string, secret: boolean): Promise<string | undefined> {
  if (!process.stdin.isTTY) return undefined
  let muted = false
  const out = new Writable({
    write(chunk, _enc, cb) {
      if (!muted) process.stderr.write(chunk)
      cb()
    },
  })
  const rl = createInterface({ input: process.stdin, output: out, terminal: true })
  try {
    return await new Promise<string>((resolve) => {
      rl.question(question, (answer) => resolve(answer))
      muted = secret
    })
  } finally {
    muted = false
    rl.close()
    if (secret) process.stderr.write('\n')
  }
}
