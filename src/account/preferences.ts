// Private preferences stored by the PDS per account (the reference PDS keeps app.bsky
// preferences locally rather than at the AppView). Personal details (birth date) are readable
// and writable only by full-access sessions, not by app passwords, as in the reference PDS.
import type { Db } from '../db/index.js'
import { xrpcError } from '../errors.js'

export const PREF_NAMESPACE = 'app.bsky'
const FULL_ACCESS_ONLY = new Set(['app.bsky.actor.defs#personalDetailsPref'])

export type Pref = { $type: string; [k: string]: unknown }

const inNamespace = (type: string) => type === PREF_NAMESPACE || type.startsWith(`${PREF_NAMESPACE}.`)
const allowed = (type: string, fullAccess: boolean) => fullAccess || !FULL_ACCESS_ONLY.has(type)

export async function getPreferences(db: Db, did: string, fullAccess: boolean): Promise<Pref[]> {
  const rows = await db.selectFrom('account_pref').select(['name', 'value_json']).where('did', '=', did).orderBy('id').execute()
  return rows.filter((r) => inNamespace(r.name) && allowed(r.name, fullAccess)).map((r) => JSON.parse(r.value_json) as Pref)
}

/** replaces every preference the caller may see with `prefs`, in one transaction */
export async function putPreferences(db: Db, did: string, prefs: unknown[], fullAccess: boolean) {
  const checked: Pref[] = []
  for (const p of prefs) {
    const type = (p as { $type?: unknown } | null)?.$type
    if (typeof type !== 'string') throw xrpcError('InvalidRequest', 'Preference is missing a $type')
    if (!inNamespace(type)) throw xrpcError('InvalidRequest', `Some preferences are not in the ${PREF_NAMESPACE} namespace`)
    if (!allowed(type, fullAccess)) throw xrpcError('InvalidRequest', 'Do not have authorization to set preferences.')
    checked.push(p as Pref)
  }
  await db.transact(async (tx) => {
    const existing = await tx.selectFrom('account_pref').select(['id', 'name']).where('did', '=', did).execute()
    const replace = existing.filter((r) => inNamespace(r.name) && allowed(r.name, fullAccess)).map((r) => r.id)
    if (replace.length) await tx.deleteFrom('account_pref').where('id', 'in', replace).execute()
    if (checked.length) {
      await tx
        .insertInto('account_pref')
        .values(checked.map((p) => ({ did, name: p.$type, value_json: JSON.stringify(p) })))
        .execute()
    }
  })
}
