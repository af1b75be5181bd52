// com.atproto.server.requestAccountMigrate: resolve the destination, mark the account
// migrating-out, hand back the 60-minute migration token.
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { startMigrationOut } from '#src/move/origin.js'

export default method(
  'com.atproto.server.requestAccountMigrate',
  (deps: Pick<Services, 'db' | 'config' | 'tokenKeys' | 'logger' | 'outbound'>) =>
    async ({ auth, input }) => {
      const out = await startMigrationOut(deps, auth.credentials.account, input.body.to)
      return { encoding: 'application/json', body: out }
    },
)
