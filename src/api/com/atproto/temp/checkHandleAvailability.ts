// com.atproto.temp.checkHandleAvailability: whether createAccount would accept this handle here
// (the same handle rules; a name some account holds or a reserved one is unavailable, with free
// alternatives). A handle createAccount would refuse outright is that same 400.
import { method } from '#src/api/method.js'
import { checkEmail, parseServiceHandle, takenHandles } from '#src/account/handles.js'
import { suggestHandles } from '#src/account/handle-suggestions.js'
import { xrpcError } from '#src/errors.js'

export default method('com.atproto.temp.checkHandleAvailability', ({ db, config }) => async ({ params }) => {
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
