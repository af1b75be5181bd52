// com.atproto.sync.getBlocks: the named blocks of the repository as a CAR; any unknown CID fails
// the call, and so does the value of a taken-down record, which is not served apart from the
// whole repository (getRepo).
import { blocksToCarFile } from '@atproto/repo'
import { parseCid, type Cid } from '@atproto/lex-data'
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { syncRepo } from '#src/repo/read.js'
import { SqlRepoStorage } from '#src/repo/storage.js'
import { takenDownValues } from '#src/repo/takedowns.js'

export default method('com.atproto.sync.getBlocks', ({ db }) => async ({ params }) => {
  await syncRepo(db, params.did)
  let cids: Cid[]
  try {
    cids = params.cids.map((c) => parseCid(c))
  } catch {
    throw xrpcError('InvalidRequest', 'Invalid CID')
  }
  const { blocks, missing } = await new SqlRepoStorage(db, params.did).getBlocks(cids)
  const hidden = await takenDownValues(
    db,
    params.did,
    cids.filter((c) => blocks.has(c)).map((c) => c.toString()),
  )
  for (const c of cids) if (hidden.has(c.toString())) missing.push(c)
  if (missing.length) throw xrpcError('BlockNotFound', `Could not find blocks: ${missing.join(', ')}`)
  return { encoding: 'application/vnd.ipld.car', body: await blocksToCarFile(null, blocks) }
})
