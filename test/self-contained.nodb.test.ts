// Every file of the repository must make sense on its own: no comment, message, lexicon text or
// doc may send the reader to a document the repository does not contain. State the rule instead,
// or point at docs/decisions.md by section title.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = fileURLToPath(new URL('..', import.meta.url))
const self = 'test/self-contained.nodb.test.ts'

// Tight on purpose: public standards may be cited by section ("RFC 9449 §4.3").
const outside: RegExp[] = [
  /DECISIONS/,
  /CONTRACT(\.md|:)/,
  /\b[Pp]art [12](:| §| of the)/,
  /(?<!RFC \d{3,5} )§/,
  /\b[Dd]ecisions? \d/,
  /\b[Ii]ssue #?\d/,
  /\bthe spec\b|\bspec's\b|spec documents?\b|server's specification/,
]

const skipped = (path: string) =>
  path === self ||
  path.startsWith('node_modules/') ||
  path.startsWith('src/generated/') ||
  /(^|\/)package-lock\.json$/.test(path) ||
  /\.(png|jpe?g|gif|ico|car|woff2?|gz|wasm)$/.test(path)

describe('self-contained repository', () => {
  it('names no document outside the repository in any tracked file', () => {
    const files = execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' })
      .split('\0')
      .filter((p) => p !== '' && !skipped(p))
    const offenders: string[] = []
    for (const path of files) {
      let text: string
      try {
        text = readFileSync(root + path, 'utf8')
      } catch {
        continue // a tracked symlink to a directory, or a file deleted in the work tree
      }
      if (text.includes('\0')) continue
      text.split('\n').forEach((line, i) => {
        if (outside.some((re) => re.test(line))) offenders.push(`${path}:${i + 1}: ${line.trim().slice(0, 120)}`)
      })
    }
    expect(offenders, offenders.join('\n')).toEqual([])
  })
})
