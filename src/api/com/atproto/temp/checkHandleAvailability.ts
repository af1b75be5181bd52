// com.atproto.temp.checkHandleAvailability: whether createAccount would accept this handle here
// (the same handle rules; a name some account holds or a reserved one is unavailable, with free
// alternatives). A handle createAccount would refuse outright is that same 400.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { checkEmail, parseServiceHandle, takenHandles } from '../../../../account/handles.js'
import { suggestHandles } from '../../../../account/handle-suggestions.js'
import { xrpcError } from '../../../../errors.js'

export default (api: Server, { db, config }: Pick<Services, 'db' | 'config'>) =>
  api.com.atproto.temp.checkHandleAvailability<AuthFor<'com.atproto.temp.checkHandleAvailability'>>(async ({ params }) => {
    if (params.email !== undefined) validEmail(params.email)
    const wanted = parseServiceHandle(params.handle, config.handleDomains, config.reservedHandles)
    const free = !wanted.reserved && !(await takenHandles(db, [wanted.handle])).has(wanted.handle)
    const result = free
      ? { $type: 'com.atproto.temp.checkHandleAvailability#resultAvailable' as const }
      : {
          $type: 'com.atproto.temp.checkHandleAvailability#resultUnavailable' as const,
          suggestions: await suggestHandles(db, config.handleDomains, wanted, params, config.reservedHandles),
        }
    return { encoding: 'application/json', body: { handle: params.handle, result } }
  })

function validEmail(email: string) {
  try {
    checkEmail(email)
  } catch {
    throw xrpcError('InvalidEmail', 'Invalid email address')
  }
}
