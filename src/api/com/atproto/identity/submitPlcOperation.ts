// com.atproto.identity.submitPlcOperation (standard atproto migration): the operation the old
// server signed, checked against this server, stored and published to the PLC directory.
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { submitPlcOperation } from '#src/move/plc-operation.js'

export default method(
  'com.atproto.identity.submitPlcOperation',
  (deps: Pick<Services, 'db' | 'config' | 'rotationKey' | 'logger'>) =>
    async ({ auth, input }) => {
      await submitPlcOperation(deps, auth.credentials.account, input.body.operation)
    },
)
