import SerqRef.Syntax
import SerqRef.State
import SerqRef.Eval
import SerqRef.Pools
import SerqRef.Sessions
import SerqRef.Engine
import SerqRef.Exec
