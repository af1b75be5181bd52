// com.atproto.identity.resolveHandle: handles hosted here; anything else is HandleNotFound.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import { xrpcError } from '../../../../errors.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.identity.resolveHandle(async ({ params }) => {
    const handle = params.handle.toLowerCase()
    const row = await db
      .selectFrom('account')
      .select('did')
      .where('handle', '=', handle)
      .where('status', '!=', 'deleted')
      .executeTakeFirst()
    if (!row) throw xrpcError('HandleNotFound', 'Unable to resolve handle')
    return { encoding: 'application/json', body: { did: row.did } }
  })
