// Handles to offer when the one a person asked for is not available: their label with a number, a
// birth year, or their email's local part, on the same service domain; only free ones are offered.
import { randomInt } from 'node:crypto'
import type { Store } from '../db/schema.js'
import { MAX_LABEL, parseServiceHandle, takenHandles } from './handles.js'

const MAX_SUGGESTIONS = 5

type Suggestion = { handle: string; method: string }

export async function suggestHandles(
  db: Store,
  domains: string[],
  wanted: { label: string; domain: string },
  hints: { email?: string; birthDate?: string },
  reserved: string[] = [],
): Promise<Suggestion[]> {
  const base = wanted.label.replace(/-+$/, '')
  const withSuffix = (suffix: string) => `${base.slice(0, MAX_LABEL - suffix.length)}${suffix}`
  const labels: Suggestion[] = []
  const year = hints.birthDate?.slice(0, 4)
  if (year && /^\d{4}$/.test(year)) labels.push({ handle: withSuffix(year), method: 'birth-year' })
  const local = hints.email
    ?.split('@')[0]
    ?.toLowerCase()
    .replace(/[^a-z0-9-]/g, '')
    .replace(/^-+|-+$/g, '')
  if (local) labels.push({ handle: local.slice(0, MAX_LABEL).replace(/-+$/, ''), method: 'email' })
  for (let i = 0; i < MAX_SUGGESTIONS; i++) labels.push({ handle: withSuffix(String(randomInt(10, 10_000))), method: 'number' })

  const candidates: Suggestion[] = []
  for (const { handle: label, method } of labels) {
    const handle = usable(`${label}${wanted.domain}`, domains, reserved)
    if (handle && !candidates.some((c) => c.handle === handle)) candidates.push({ handle, method })
  }
  const taken = await takenHandles(
    db,
    candidates.map((c) => c.handle),
  )
  return candidates.filter((c) => !taken.has(c.handle)).slice(0, MAX_SUGGESTIONS)
}

/** the normalized handle when anyone could register it here, else undefined */
function usable(handle: string, domains: string[], reserved: string[]): string | undefined {
  try {
    const parsed = parseServiceHandle(handle, domains, reserved)
    return parsed.reserved ? undefined : parsed.handle
  } catch {
    return undefined
  }
}
