// com.atproto.space.notifyWrite: a repo host tells the space host a writer's repo advanced; spaces
// this server does not govern are answered 200 and ignored.
import { method } from '#src/api/method.js'
import { receiveNotifyWrite } from '#src/space/host.js'

export default method('com.atproto.space.notifyWrite', (deps) => async ({ auth, input }) => {
  const { iss, aud } = auth.credentials
  const { space, repo, rev, hash } = input.body
  await receiveNotifyWrite(deps, { iss, aud }, { space, repo, rev, hash })
})
