// What every operator command shares: its options parsed from argv, `--help`, `--json`, and
// output as `key: value` lines or one JSON document.
import { parseArgs, type ParseArgsConfig } from 'node:util'

export class UsageError extends Error {}

export type Options = NonNullable<ParseArgsConfig['options']>
export type Parsed = { values: Record<string, string | boolean | undefined>; positionals: string[]; json: boolean }

export function parse(args: string[], options: Options): Parsed | 'help' {
  let parsed
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      options: { ...options, help: { type: 'boolean', short: 'h' }, json: { type: 'boolean' } },
    })
  } catch (err) {
    throw new UsageError((err as Error).message)
  }
  if (parsed.values.help) return 'help'
  return { values: parsed.values, positionals: parsed.positionals, json: !!parsed.values.json }
}

export const str = (p: Parsed, name: string) => {
  const v = p.values[name]
  return typeof v === 'string' ? v : undefined
}

export function positiveInt(v: string | undefined, name: string, fallback: number): number {
  if (v === undefined) return fallback
  const n = Number(v)
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name} must be a positive integer`)
  return n
}

type Value = string | number | boolean | null | undefined | Value[] | { [k: string]: Value }

/** one JSON document with --json; otherwise `key: value` lines (nested values as compact JSON) */
export function output(json: boolean, value: Record<string, Value> | Record<string, Value>[]) {
  if (json) {
    process.stdout.write(JSON.stringify(value, null, 2) + '\n')
    return
  }
  const rows = Array.isArray(value) ? value : [value]
  const blocks = rows.map((row) =>
    Object.entries(row)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${k}: ${typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v)}`)
      .join('\n'),
  )
  if (blocks.length) process.stdout.write(blocks.join('\n\n') + '\n')
}
