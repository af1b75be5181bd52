// The architecture page is a map a newcomer trusts: every table the schema declares is on it, and
// every source path it names exists.
import { existsSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

const page = readFileSync(new URL('../docs/architecture.md', import.meta.url), 'utf8')
const contributing = readFileSync(new URL('../CONTRIBUTING.md', import.meta.url), 'utf8')
const schema = readFileSync(new URL('../src/db/schema.ts', import.meta.url), 'utf8')
const root = new URL('../', import.meta.url)

/** table names: the keys of `interface Schema` */
function tables(): string[] {
  const body = /export interface Schema \{([^}]*)\}/.exec(schema)?.[1] ?? ''
  return [...body.matchAll(/^\s*(\w+):/gm)].map((m) => m[1])
}

/** `src/...`, `test/...`, `deploy/...` paths in backticks; `(nsid path)` placeholders skipped */
function namedPaths(text: string): string[] {
  const out = new Set<string>()
  for (const [, code] of text.matchAll(/`([^`\n]+)`/g)) {
    for (const part of code.split(/[\s,]+/)) {
      const path = part.replace(/[:;.)]+$/, '')
      if (!/^(src|test|deploy|docs|bench|codegen|lexicons|bin|native)\//.test(path)) continue
      // placeholders (`<nsid path>`, `NNN-short-name.ts`) name a pattern, not a file
      if (/[<>*(){}]|\.\.\.|NNN/.test(path) || path.startsWith('src/generated/')) continue
      out.add(path)
    }
  }
  return [...out]
}

// what the tests and the bench write at run time, never committed
const ignored = readFileSync(new URL('../.gitignore', import.meta.url), 'utf8')
  .split('\n')
  .filter(Boolean)

function exists(path: string): boolean {
  return existsSync(new URL(path, root)) || ignored.includes(path)
}

describe('docs/architecture.md', () => {
  it('names every table of the schema', () => {
    const listed = tables()
    expect(listed.length).toBeGreaterThan(20)
    const missing = listed.filter((t) => !page.includes(`\`${t}\``))
    expect(missing).toEqual([])
  })

  it('names only source paths that exist', () => {
    const paths = namedPaths(page)
    expect(paths.length).toBeGreaterThan(10)
    expect(paths.filter((p) => !exists(p))).toEqual([])
  })

  it('names only files that exist in each folder row', () => {
    const files = folderRowFiles(page)
    expect(files.length).toBeGreaterThan(10)
    expect(files.filter((p) => !exists(p))).toEqual([])
  })
})

/** in the folder table, a row's bare file names (`registry.ts`, `sign-in/flow.ts`) live in its folder */
function folderRowFiles(text: string): string[] {
  const out: string[] = []
  for (const line of text.split('\n')) {
    const folder = /^\| `(src\/[\w-]+\/)`/.exec(line)?.[1]
    if (!folder) continue
    const rest = line.slice(line.indexOf('|', 2))
    for (const [, name] of rest.matchAll(/`([\w./-]+\.ts)`/g)) {
      if (/^(src|test|docs|bench|deploy)\//.test(name)) continue
      // `web/rows.ts` in the src/web/ row is written from src/
      out.push(name.startsWith(folder.slice(4)) ? `src/${name}` : `${folder}${name}`)
    }
  }
  return out
}

describe('CONTRIBUTING.md', () => {
  it('names only source paths that exist', () => {
    expect(namedPaths(contributing).filter((p) => !exists(p))).toEqual([])
  })
})
