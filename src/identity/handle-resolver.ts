// Which DID a handle names: today the handles of accounts hosted here. Every handle lookup goes
// through this one function, so other ways to resolve a handle plug in here.
import type { Store } from '../db/schema.js'

/** the DID `handle` (normalized) names, undefined when it names none; `fresh`: skip any cache */
export async function resolveHandleDid(db: Store, handle: string, _opts: { fresh?: boolean } = {}): Promise<string | undefined> {
  const row = await db
    .selectFrom('account')
    .select('did')
    .where('handle', '=', handle)
    .where('status', '!=', 'deleted')
    .executeTakeFirst()
  return row?.did
}
